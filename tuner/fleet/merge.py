"""Fold the RunResults of a run's driver shards into one RunResult.

Exact by construction:
- counts (per transaction and outcome, measured window and whole run) add;
- latency histograms merge bucket by bucket (``LatencyHistogram.merge``), so the merged percentiles are
  those of all shards' samples together, never an average of percentiles;
- every shard started its warm-up at the same wall-clock instant (``--start-at``) with the same warm-up,
  interval and duration, so interval k of every shard covers the same span: the merged timeline adds the
  intervals' counts and merges their histograms.

Server-side NOPM and TPM describe the one server: each shard measured the same counters over the same
window, so the merged figure is their median (and each shard's is kept), never their sum.
"""

from __future__ import annotations

import statistics
from typing import Any

from tuner.core.errors import FleetError
from tuner.core.measure import OPS, OUTCOMES, LatencyHistogram, RunResult

ALIGN_TOLERANCE_S = 0.5  # shards' interval ends may differ by scheduling jitter, never by a tick


def _add_counts(into: dict[str, dict[str, int]], other: dict[str, dict[str, int]]) -> None:
    for op, d in (other or {}).items():
        slot = into.setdefault(op, {o: 0 for o in OUTCOMES})
        for o, n in d.items():
            slot[o] = slot.get(o, 0) + int(n)


def merge_histograms(parts: list[dict[str, dict]]) -> dict[str, LatencyHistogram]:
    out: dict[str, LatencyHistogram] = {}
    for part in parts:
        for op, d in (part or {}).items():
            out.setdefault(op, LatencyHistogram()).merge(d)
    return out


def _check_compatible(results: list[RunResult]) -> None:
    if not results:
        raise FleetError("no shard returned a result; see the per-host messages above")
    shards = [(r.extra or {}).get("shard") for r in results]
    if any(s is None for s in shards):
        raise FleetError("a result to merge was not produced by `tpcc run --shard`; merge only the shards of one run")
    counts = {s.split("/")[1] for s in shards}
    if len(counts) != 1 or len(set(shards)) != len(shards):
        raise FleetError(f"the results are not the shards of one run (shards {', '.join(shards)}); "
                         "merge each run's shards separately")
    for key in ("start_at",):
        vals = {(r.extra or {}).get(key) for r in results}
        if len(vals) != 1:
            raise FleetError(f"the shards disagree on {key} ({sorted(map(str, vals))}); they are not one run")
    for attr in ("warmup_seconds", "mode", "warehouses"):
        vals = {getattr(r, attr) for r in results}
        if len(vals) != 1:
            raise FleetError(f"the shards disagree on {attr} ({sorted(map(str, vals))}); they are not one run")
    if any("histograms" not in (r.extra or {}) for r in results):
        raise FleetError("a shard result has no latency histograms (an older innotier on that host); "
                         "install the same version on every driver host with `innotier fleet install`")


def merge_timelines(results: list[RunResult]) -> list[dict[str, Any]]:
    """Interval k of every shard covers the same span (shared start): add counts, merge histograms."""
    n = max((len(r.timeline) for r in results), default=0)
    out = []
    for k in range(n):
        points = []
        for r in results:
            if k < len(r.timeline):
                ih = (r.extra or {}).get("interval_histograms") or []
                points.append((r.timeline[k], ih[k] if k < len(ih) else None))
        ts = [p["t"] for p, _ in points]
        if max(ts) - min(ts) > ALIGN_TOLERANCE_S + max(p["seconds"] for p, _ in points) * 0.05:
            raise FleetError(f"interval {k} of the shards ends at different times ({min(ts):.1f}..{max(ts):.1f} s); "
                             "their clocks disagree: synchronise the driver hosts (chrony/NTP) and run again")
        seconds = max(p["seconds"] for p, _ in points)
        commits: dict[str, int] = {}
        for p, _ in points:
            for op, c in p["commits"].items():
                commits[op] = commits.get(op, 0) + c
        hists = [h for _, h in points]
        latency = ({op: h.summary_ms() for op, h in merge_histograms(hists).items() if h.count}
                   if all(h is not None for h in hists) else {})
        out.append({
            "t": round(max(ts), 3), "seconds": round(seconds, 3),
            # completed New-Orders (committed + rolled back, TPC-C 5.4.1): each shard's rate over its interval
            "tpmc": round(sum(p["tpmc"] * p["seconds"] for p, _ in points) / seconds, 1),
            "tpm_total": round(sum(commits.values()) * 60.0 / seconds, 1),
            "commits": commits, "errors": sum(p["errors"] for p, _ in points),
            "retries": sum(p["retries"] for p, _ in points), "latency_ms": latency,
            "shards": len(points),
        })
    return out


def merge_results(results: list[RunResult], hosts: list[str] | None = None) -> RunResult:
    """One RunResult from the shards of one run (see the module docstring for what is exact)."""
    _check_compatible(results)
    results = sorted(results, key=lambda r: int(r.extra["shard"].split("/")[0]))
    counts: dict[str, dict[str, int]] = {}
    all_counts: dict[str, dict[str, int]] = {}
    for r in results:
        _add_counts(counts, r.counts)
        _add_counts(all_counts, r.extra.get("all_counts") or {})
    hist = merge_histograms([r.extra["histograms"] for r in results])
    measured = max(r.measured_seconds or 0.0 for r in results)
    no = counts.get("new_order", {})
    new_orders = no.get("commit", 0) + no.get("rollback", 0)  # completed New-Orders (TPC-C 5.4.1)
    nopms = [r.nopm for r in results if r.nopm is not None]
    tpms = [r.tpm for r in results if r.tpm is not None]
    failures = [f"shard {r.extra['shard']}: {r.failure}" for r in results if r.failure]
    per_shard = []
    for i, r in enumerate(results):
        x = r.extra or {}
        per_shard.append({"shard": x["shard"], "host": (hosts[i] if hosts and i < len(hosts) else None),
                          "clients": r.clients, "home_warehouses": x.get("home_warehouses"), "tpmc": r.tpmc,
                          "new_orders": r.counts.get("new_order", {}).get("commit", 0),
                          "nopm": r.nopm, "client_cpu_seconds": x.get("client_cpu_seconds"),
                          "parent_cpu_seconds": x.get("parent_cpu_seconds"), "complete": r.complete})
    first = results[0]
    extra = {
        "shards": len(results), "per_shard": per_shard, "start_at": first.extra.get("start_at"),
        "server": first.extra.get("server"),
        "histograms": {op: h.to_dict() for op, h in hist.items()},
        "all_counts": all_counts,
        "client_cpu_seconds": round(sum((r.extra or {}).get("client_cpu_seconds") or 0.0 for r in results), 3),
        "nopm_per_shard": nopms,
        # clause 2.7.4.2: the skipped districts of every shard's Deliveries
        "delivery_skipped_districts": sum((r.extra or {}).get("delivery_skipped_districts") or 0 for r in results),
    }
    return RunResult(
        driver="builtin", mode=first.mode, warehouses=first.warehouses,
        clients=sum(r.clients or 0 for r in results), warmup_seconds=first.warmup_seconds,
        measured_seconds=round(measured, 3),
        tpmc=round(new_orders * 60.0 / measured, 1) if measured > 0 else 0.0,
        nopm=round(statistics.median(nopms), 1) if nopms else None,
        tpm=round(statistics.median(tpms), 1) if tpms else None,
        counts={op: counts.get(op, {o: 0 for o in OUTCOMES}) for op in OPS},
        latency_ms={op: h.summary_ms() for op, h in hist.items() if h.count},
        timeline=merge_timelines(results),
        errors=sum(r.errors for r in results), retries=sum(r.retries for r in results),
        rollbacks=sum(r.rollbacks for r in results), complete=all(r.complete for r in results),
        failure="; ".join(failures) or None, extra=extra)
