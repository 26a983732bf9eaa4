"""go-tpc (pingcap/go-tpc) as an external driver: ``go-tpc tpcc ... prepare|run``.

Transactions run as client-side prepared statements: mode ``statements``.
go-tpc has no warm-up option (its warm-up hook is never called), so the warm-up
is a separate ``--time <warm-up>s run``, as the recorded fixture was made.

Credentials: go-tpc takes the password only as ``-p PASSWORD``, so it gets a
temporary account scoped to its database (``_common.bench_account``), never the
caller's password.  The adapter creates the database first; go-tpc creates it
only when missing (cmd/go-tpc/main.go openDB).

Output (the peer-output fixture's README): every interval prints one "[Current]
<TYPE> - Takes(s): ..., Count: ..., TPM: ..., Sum(ms):, Avg(ms):, 50th(ms):,
90th(ms):, 95th(ms):, 99th(ms):, 99.9th(ms):, Max(ms):" line per type;
failures go to <TYPE>_ERR lines; the end prints "[Summary]" lines and "tpmC: X,
tpmTotal: Y, efficiency: Z%" (tpmTotal excludes the _ERR rows).

Errors: without ``--ignore-error`` a worker that meets a real error (a deadlock,
a lock-wait timeout) stops for the rest of the run and the run goes on with fewer
clients, unnoticed; so runs pass ``--ignore-error`` (the worker records the
failure as ``<TYPE>_ERR`` and goes on).  At the ``--time`` deadline each worker
that was inside a transaction prints "run worker N stopped due to timeout: exec
... failed context deadline exceeded" and records that transaction as an _ERR
too: those are the end of the run, not errors, so ``errors`` is the _ERR count
minus the deadline lines (per-type counts keep go-tpc's _ERR rows as printed; the
deadline count is in ``extra``).  NOPM and TPM come from the server's counters (HammerDB's
definitions) sampled around the measured process.
"""

from __future__ import annotations

import re
import time

from tuner.core.errors import UsageError
from tuner.core.measure import RunResult
from tuner.core.server import ConnectionSpec
from tuner.tpcc.adapters import _common as common
from tuner.tpcc.config import RunConfig

name = "go-tpc"
MODE = "statements"
DISTRICT_TABLE = "district"
WAREHOUSE_TABLE = "warehouse"
HOW_TO_GET = ("build it from https://github.com/pingcap/go-tpc (go build -o go-tpc ./cmd/go-tpc) or take a release "
              "binary, and pass --tool-path /path/to/go-tpc")
DEFAULT_LOAD_THREADS = 4

OPS = {"NEW_ORDER": "new_order", "PAYMENT": "payment", "ORDER_STATUS": "order_status", "DELIVERY": "delivery",
       "STOCK_LEVEL": "stock_level"}
NUM = r"(\d+(?:\.\d+)?)"
LINE_RE = re.compile(
    rf"^\[(Current|Summary)\] ([A-Z_]+?)(_ERR)? - Takes\(s\): {NUM}, Count: (\d+), TPM: {NUM}, Sum\(ms\): {NUM}, "
    rf"Avg\(ms\): {NUM}, 50th\(ms\): {NUM}, 90th\(ms\): {NUM}, 95th\(ms\): {NUM}, 99th\(ms\): {NUM}, "
    rf"99\.9th\(ms\): {NUM}, Max\(ms\): {NUM}", re.M)
FINAL_RE = re.compile(rf"tpmC: {NUM}, tpmTotal: {NUM}, efficiency: {NUM}%")
FINISHED = "Finished"
# A worker interrupted at the --time deadline inside a transaction (the "after N iterations" form is not).
DEADLINE_RE = re.compile(r"run worker \d+ stopped due to timeout: ")


# ---------------------------------------------------------------------------
# Parsing


def _row(m: re.Match) -> dict:
    g = m.groups()
    return {"kind": g[0], "op": OPS.get(g[1], g[1].lower()), "err": bool(g[2]), "takes": float(g[3]),
            "count": int(g[4]), "tpm": float(g[5]),
            "latency": {"p50": float(g[8]), "p90": float(g[9]), "p95": float(g[10]), "p99": float(g[11]),
                        "p99.9": float(g[12]), "max": float(g[13]), "avg": float(g[7]), "count": int(g[4])}}


def _timeline(rows: list[dict]) -> list[dict]:
    """Group [Current] rows into intervals: an interval ends where a type repeats."""
    groups: list[list[dict]] = []
    seen: set[tuple[str, bool]] = set()
    for r in rows:
        key = (r["op"], r["err"])
        if not groups or key in seen:
            groups.append([])
            seen = set()
        groups[-1].append(r)
        seen.add(key)
    points, t = [], 0.0
    for g in groups:
        ok = [r for r in g if not r["err"]]
        secs = max((r["takes"] for r in g), default=0.0) or 1.0
        t += secs
        commits = {r["op"]: r["count"] for r in ok}
        points.append({"t": round(t, 1), "seconds": secs,
                       "tpmc": next((r["tpm"] for r in ok if r["op"] == "new_order"), 0.0),
                       "tpm_total": round(sum(r["tpm"] for r in ok), 1), "commits": commits,
                       "errors": sum(r["count"] for r in g if r["err"]), "retries": 0,
                       "latency_ms": {r["op"]: r["latency"] for r in ok}})
    return points


def parse_output(text: str) -> RunResult:
    """``go-tpc tpcc ... run`` console output -> RunResult (tpmC, per-type Summary percentiles, _ERR counts)."""
    rows = [_row(m) for m in LINE_RE.finditer(text)]
    current = [r for r in rows if r["kind"] == "Current"]
    summary = [r for r in rows if r["kind"] == "Summary"]
    final = FINAL_RE.search(text)
    counts: dict[str, dict[str, int]] = {}
    latency: dict[str, dict[str, float]] = {}
    for r in summary:
        c = counts.setdefault(r["op"], {"commit": 0, "rollback": 0, "retry": 0, "error": 0})
        if r["err"]:
            c["error"] += r["count"]
        else:
            c["commit"] += r["count"]
            latency[r["op"]] = r["latency"]
    new_order = next((r for r in summary if r["op"] == "new_order" and not r["err"]), None)
    measured = new_order["takes"] if new_order else max((r["takes"] for r in summary), default=None)
    failure = None if final else "go-tpc printed no final tpmC line; the run did not finish"
    extra: dict = {}
    if final:
        extra.update({"tpm_total": float(final.group(2)), "efficiency_pct": float(final.group(3))})
    err_rows = sum(c["error"] for c in counts.values())
    deadline = len(DEADLINE_RE.findall(text))
    extra["err_rows"] = err_rows
    extra["deadline_err_rows"] = min(deadline, err_rows)
    return RunResult(
        driver=name, mode=MODE, warehouses=None, clients=None, warmup_seconds=None, measured_seconds=measured,
        tpmc=float(final.group(1)) if final else None,
        tps=round(float(final.group(2)) / 60.0, 2) if final else None,
        counts=counts, latency_ms=latency, timeline=_timeline(current),
        errors=max(0, err_rows - deadline),
        complete=failure is None, failure=failure, extra=extra)


# ---------------------------------------------------------------------------
# The tool


def find_tool(tool_path: str | None = None) -> str:
    """Path of the ``go-tpc`` binary (from --tool-path, file or directory holding it, or PATH)."""
    return common.find_program(("go-tpc",), tool_path, "go-tpc", HOW_TO_GET)


def _base_argv(binary: str, account: common.BenchAccount, database: str, warehouses: int, threads: int) -> list[str]:
    return [binary, "tpcc", "--warehouses", str(warehouses), "-H", account.endpoint.host,
            "-P", str(account.endpoint.port), "-U", account.user, "-p", account.password, "-D", database,
            "-T", str(threads)]


def load(spec: ConnectionSpec, warehouses: int, database: str = "tpcc", tool_path: str | None = None, *,
         drop: bool = False, jobs: int | None = None, on_line: common.LineSink | None = None) -> float:
    """``go-tpc tpcc prepare --no-check`` into ``database``; return seconds taken."""
    if warehouses < 1:
        raise UsageError(f"--warehouses {warehouses} is not valid; give 1 or more")
    common.check_database_name(database)
    binary = find_tool(tool_path)
    common.prepare_database(spec, database, drop, "go-tpc")
    t0 = time.monotonic()
    with common.bench_account(spec, database) as account:
        out = common.run_tool(_base_argv(binary, account, database, warehouses, jobs or DEFAULT_LOAD_THREADS)
                              + ["prepare", "--no-check"], timeout=600 + 300 * warehouses,
                              secrets_=(account.password,), on_line=on_line)
    common.check_ran(out, "go-tpc prepare", ok=FINISHED in out.text)
    common.verify_loaded(spec, database, WAREHOUSE_TABLE, name, "go-tpc", warehouses)
    return time.monotonic() - t0


def run(spec: ConnectionSpec, cfg: RunConfig, *, on_line: common.LineSink | None = None,
        on_measuring: common.MeasuringSink | None = None) -> RunResult:
    """A warm-up run (--time warm-up) then the measured run (--time duration --interval interval)."""
    binary, loaded = common.prepare_run(spec, cfg, WAREHOUSE_TABLE, name, "go-tpc", find_tool)
    wait = ["--wait"] if cfg.keying_and_think else []
    keep_going = ["--ignore-error"]  # a failing worker records <TYPE>_ERR and goes on, instead of stopping

    def execute(account: common.BenchAccount, window: common.CounterWindow) -> common.Measured:
        def watch(line: str) -> None:
            if line.strip() == FINISHED:
                window.stop()

        base = _base_argv(binary, account, cfg.database, loaded, cfg.clients)
        warm = None
        if cfg.warmup > 0:
            warm = common.run_tool(base + keep_going + ["--time", f"{cfg.warmup:g}s", "--interval",
                                                        f"{cfg.interval:g}s", "run"] + wait,
                                   timeout=cfg.warmup + 120 + cfg.clients, secrets_=(account.password,),
                                   on_line=on_line)
            common.check_ran(warm, "go-tpc warm-up run")
        window.start()
        if on_measuring:
            on_measuring(float(cfg.duration))
        out = common.run_tool(base + keep_going + ["--time", f"{cfg.duration:g}s", "--interval",
                                                   f"{cfg.interval:g}s", "run"] + wait,
                              timeout=cfg.duration + 120 + cfg.clients, secrets_=(account.password,),
                              on_line=on_line, watch=watch)
        window.stop()
        return common.Measured([("warm-up", warm), ("measured", out)], out)

    peer = common.PeerRun(tool=name, label="go-tpc run", path=binary, mode=MODE,
                          runs_as="client-side prepared statements", district_table=DISTRICT_TABLE,
                          counters_note="from the measured process's start to its 'Finished' line",
                          parse=parse_output, execute=execute)
    result, done = common.run_measured(spec, cfg, peer, common.run_settings(
        cfg, loaded, common.endpoint(spec), ignore_error=True, weights="go-tpc default 45,43,4,4,4"))
    result.warehouses = loaded
    result.clients = cfg.clients
    result.warmup_seconds = float(cfg.warmup)
    warm = done.runs[0][1]
    if warm is not None:
        result.extra["warmup_tpmc"] = parse_output(warm.text).tpmc
    return result
