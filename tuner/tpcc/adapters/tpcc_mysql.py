"""tpcc-mysql (Percona-Lab/tpcc-mysql) as an external driver: ``tpcc_load`` and ``tpcc_start``.

The schema comes from the checkout's ``create_table.sql`` and ``add_fkey_idx.sql``
(applied with the mariadb/mysql client before ``tpcc_load``, as the recorded
fixture was made); the binaries sit in the checkout root after ``cd src && make``.
Transactions run as client-side statements: mode ``statements``.

Credentials: both binaries take the password only as ``-p PASSWORD`` and print
it back ("option p with value ..."), so they get a temporary account scoped to
their database (see ``_common.bench_account``), never the caller's password; the
SQL files go through the client with a 0600 option file.

Output format (src/main.c, the peer-output fixture's README): each interval line
is "<sec>, trx: <New-Order count>, 95%: <ms>, 99%: <ms>, max_rt: <ms>,
<count>|<max ms>" for Payment, Order-Status, Delivery and Stock-Level.  The
times are milliseconds (driver.c times with clock_gettime and multiplies by
1000), although the upstream README says seconds.  ``<Raw Results>`` rows [0]-[4]
(New-Order, Payment, Order-Status, Delivery, Stock-Level) give sc (on time), lt
(late: measured against the spec's limits in seconds, so meaningless), rt
(retries) and fl (failures); TpmC = (sc + lt of New-Order) * 60 / measured
seconds.  The printed avg_rt divides a total that includes the ramp-up by the
measured count only (driver.c adds to total_rt whether or not counting_on), so it
is kept in ``extra`` as printed and not reported as an average.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time

from tuner.core.errors import ToolMissing, UsageError, WorkloadError
from tuner.core.measure import RunResult
from tuner.core.server import ConnectionSpec
from tuner.tpcc.adapters import _common as common
from tuner.tpcc.config import RunConfig

name = "tpcc-mysql"
MODE = "statements"
DISTRICT_TABLE = "district"
WAREHOUSE_TABLE = "warehouse"
SCHEMA_FILES = ("create_table.sql", "add_fkey_idx.sql")
HOW_TO_GET = ("build it from https://github.com/Percona-Lab/tpcc-mysql (cd src && make; Debian needs "
              "libmariadb-dev) and pass --tool-path /path/to/tpcc-mysql")
OP_ORDER = ("new_order", "payment", "order_status", "delivery", "stock_level")  # [0]..[4] in main.c

PARAM_RE = {
    "warehouses": re.compile(r"\[warehouse\]: (\d+)"),
    "clients": re.compile(r"\[connection\]: (\d+)"),
    "rampup": re.compile(r"\[rampup\]: (\d+) \(sec\.\)"),
    "measure": re.compile(r"\[measure\]: (\d+) \(sec\.\)"),
}
NUM = r"(\d+(?:\.\d+)?)"
INTERVAL_RE = re.compile(
    rf"^\s*(\d+), trx: (\d+), 95%: {NUM}, 99%: {NUM}, max_rt: {NUM}, "
    rf"(\d+)\|{NUM}, (\d+)\|{NUM}, (\d+)\|{NUM}, (\d+)\|{NUM}\s*$", re.M)
RAW_RE = re.compile(r"^\s*\[(\d)\] sc:(\d+) lt:(\d+)\s+rt:(\d+)\s+fl:(\d+) avg_rt: ([\d.]+) \((\d+)\)", re.M)
MEASURED_RE = re.compile(r"^ in (\d+) sec\.", re.M)
TPMC_RE = re.compile(r"([\d.]+) TpmC")
MEASURING_START = "MEASURING START."
STOPPING = "STOPPING THREADS"
LOAD_DONE = "DATA LOADING COMPLETED SUCCESSFULLY"


# ---------------------------------------------------------------------------
# Parsing


def _param(text: str, key: str) -> int | None:
    m = PARAM_RE[key].search(text)
    return int(m.group(1)) if m else None


def _timeline(text: str) -> list[dict]:
    points = []
    prev_t = 0
    for m in INTERVAL_RE.finditer(text):
        g = m.groups()
        t = int(g[0])
        secs = float(t - prev_t) or 1.0
        prev_t = t
        commits = {"new_order": int(g[1])}
        latency = {"new_order": {"p95": float(g[2]), "p99": float(g[3]), "max": float(g[4]), "count": int(g[1])}}
        for i, op in enumerate(OP_ORDER[1:]):
            n, mx = int(g[5 + 2 * i]), float(g[6 + 2 * i])
            commits[op] = n
            latency[op] = {"max": mx, "count": n}
        points.append({"t": float(t), "seconds": secs, "tpmc": round(commits["new_order"] * 60.0 / secs, 1),
                       "tpm_total": round(sum(commits.values()) * 60.0 / secs, 1), "commits": commits,
                       "errors": 0, "retries": 0, "latency_ms": latency})
    return points


def parse_output(text: str) -> RunResult:
    """tpcc_start's console output -> RunResult (tpmC, interval timeline, Raw Results counts)."""
    timeline = _timeline(text)
    raw = {int(m.group(1)): m for m in RAW_RE.finditer(text)}
    tpmc = TPMC_RE.search(text)
    measured = MEASURED_RE.search(text)
    counts: dict[str, dict[str, int]] = {}
    latency: dict[str, dict[str, float]] = {}
    raw_rows: dict[str, dict[str, float]] = {}
    for i, op in enumerate(OP_ORDER):
        m = raw.get(i)
        if not m:
            continue
        sc, lt, rt, fl = (int(m.group(k)) for k in (2, 3, 4, 5))
        counts[op] = {"commit": sc + lt, "rollback": 0, "retry": rt, "error": fl}
        raw_rows[op] = {"sc": sc, "lt": lt, "rt": rt, "fl": fl, "avg_rt_ms_as_printed": float(m.group(6))}
        maxima = [p["latency_ms"][op]["max"] for p in timeline if op in p["latency_ms"]]
        latency[op] = {"count": sc + lt}
        if maxima:
            latency[op]["max"] = max(maxima)
    secs = float(measured.group(1)) if measured else (timeline[-1]["t"] if timeline else None)
    total = sum(r["sc"] + r["lt"] + r["fl"] for r in raw_rows.values()) if raw_rows else None
    failure = None
    if not tpmc or len(raw) < len(OP_ORDER):
        failure = "tpcc_start printed no final <TpmC> and <Raw Results>; the run did not finish"
    extra: dict = {"raw_results": raw_rows} if raw_rows else {}
    if total is not None:
        extra["transactions"] = total
    if timeline:
        extra["latency_scope"] = "New-Order p95/p99 per interval only; whole-run max is the largest interval max"
    return RunResult(
        driver=name, mode=MODE, warehouses=_param(text, "warehouses"), clients=_param(text, "clients"),
        warmup_seconds=float(w) if (w := _param(text, "rampup")) is not None else None,
        measured_seconds=secs,
        tpmc=float(tpmc.group(1)) if tpmc else None,
        tps=round(total / secs, 2) if total is not None and secs else None,
        counts=counts, latency_ms=latency, timeline=timeline,
        errors=sum(c["error"] for c in counts.values()), retries=sum(c["retry"] for c in counts.values()),
        complete=failure is None, failure=failure, extra=extra)


# ---------------------------------------------------------------------------
# The tool


def find_tool(tool_path: str | None = None) -> str:
    """Path of ``tpcc_start`` (--tool-path: the file or the checkout; else PATH); ``tpcc_load`` must sit beside it."""
    start = common.find_program(("tpcc_start",), tool_path, "tpcc-mysql", HOW_TO_GET)
    if not common.executable(os.path.join(os.path.dirname(start), "tpcc_load")):
        raise ToolMissing(f"tpcc-mysql: tpcc_load is not beside {start}; {HOW_TO_GET}")
    return start


def schema_files(start: str) -> list[str]:
    """create_table.sql and add_fkey_idx.sql from the checkout holding tpcc_start."""
    d = os.path.dirname(start)
    paths = [os.path.join(d, f) for f in SCHEMA_FILES]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise ToolMissing(f"tpcc-mysql: {', '.join(missing)} not found beside tpcc_start; point --tool-path at "
                          "a full tpcc-mysql checkout (the schema comes from its SQL files)")
    return paths


def _client() -> str:
    for c in ("mariadb", "mysql"):
        found = shutil.which(c)
        if found:
            return found
    raise ToolMissing("tpcc-mysql load needs the mariadb (or mysql) command-line client; "
                      "apt-get install mariadb-client")


def _apply_sql(spec: ConnectionSpec, database: str, path: str) -> None:
    with spec.client_option_file() as opt, open(path, "rb") as fh:
        proc = subprocess.run([_client(), f"--defaults-file={opt}", database], stdin=fh, capture_output=True,
                              timeout=600)
    if proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise WorkloadError(f"applying {os.path.basename(path)} to {database} failed: {msg[0]}; fix it and "
                            "load again with drop")


def _connection_args(account: common.BenchAccount, database: str) -> list[str]:
    return ["-h", account.endpoint.host, "-P", str(account.endpoint.port), "-d", database,
            "-u", account.user, "-p", account.password]


def load(spec: ConnectionSpec, warehouses: int, database: str = "tpcc", tool_path: str | None = None, *,
         drop: bool = False, jobs: int | None = None, on_line: common.LineSink | None = None) -> float:
    """Create tpcc-mysql's schema in ``database`` and fill it with ``tpcc_load``; return seconds taken.

    ``jobs`` > 1 runs tpcc_load's four parts (items, warehouses, customers,
    orders) as parallel processes, as the checkout's load.sh does; default one process.
    """
    if warehouses < 1:
        raise UsageError(f"--warehouses {warehouses} is not valid; give 1 or more")
    common.check_database_name(database)
    start = find_tool(tool_path)
    loader = os.path.join(os.path.dirname(start), "tpcc_load")
    files = schema_files(start)
    _client()
    common.prepare_database(spec, database, drop, "tpcc-mysql")
    t0 = time.monotonic()
    for f in files:
        _apply_sql(spec, database, f)
    with common.bench_account(spec, database) as account:
        base = [loader] + _connection_args(account, database) + ["-w", str(warehouses)]
        parts = [[]] if not jobs or jobs <= 1 else [["-l", str(p), "-m", "1", "-n", str(warehouses)]
                                                     for p in (1, 2, 3, 4)]
        outs: list[common.ToolOutput] = [None] * len(parts)  # type: ignore[list-item]

        def one(i: int) -> None:
            outs[i] = common.run_tool(base + parts[i], cwd=os.path.dirname(start), timeout=600 + 300 * warehouses,
                                      secrets_=(account.password,), on_line=on_line)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(parts))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    for out in outs:
        common.check_ran(out, "tpcc_load", ok=LOAD_DONE in out.text)
    common.verify_loaded(spec, database, WAREHOUSE_TABLE, name, "tpcc_load", warehouses)
    return time.monotonic() - t0


CHECK_BY = common.CONDITIONS_CHECK_BY  # check() runs ours, not a check of the peer's
NEW_ORDER_VIEW = "new_order"  # tpcc-mysql names the NEW-ORDER table new_orders
# Conditions tpcc-mysql's own transactions break (after its runs, never after its load alone):
# - 12: its Payment updates C_BALANCE and C_DATA only, not C_YTD_PAYMENT and C_PAYMENT_CNT (src/main.c, the
#   prepared "UPDATE customer SET c_balance = ?, c_data = ?"), which clause 2.5.2.2 requires;
# - 10 (C_BALANCE against the order lines and payments): most likely its balances, computed in C float
#   (src/payment.c: c_balance - h_amount; src/delivery.c: the order lines' sum), which holds about seven
#   significant digits, so a large balance can round to the wrong cent.  Inferred from the source.
KNOWN_DEVIATIONS = {
    "3.3.2.10": "tpcc-mysql computes C_BALANCE in C float (src/payment.c, src/delivery.c), which can round "
                "a balance to the wrong cent",
    "3.3.2.12": "tpcc-mysql's Payment does not keep C_YTD_PAYMENT (clause 2.5.2.2)",
}


def check(spec: ConnectionSpec, warehouses: int, database: str = "tpcc", tool_path: str | None = None,
          on_line: common.LineSink | None = None) -> tuple[bool, str]:
    """innotier's TPC-C consistency conditions on tpcc-mysql's schema (it ships no check of its own).

    tpcc-mysql's NEW-ORDER table is ``new_orders``; the checks read it through a view
    named ``new_order`` that exists only while they run.
    """
    common.check_database_name(database)
    conn = spec.with_database(database).connect()
    try:
        cur = conn.cursor()
        cur.execute(f"CREATE VIEW `{NEW_ORDER_VIEW}` AS SELECT * FROM new_orders")
        try:
            return common.conditions_check(spec, database, KNOWN_DEVIATIONS)
        finally:
            cur.execute(f"DROP VIEW IF EXISTS `{NEW_ORDER_VIEW}`")
            cur.close()
    finally:
        conn.close()


def run(spec: ConnectionSpec, cfg: RunConfig, *, on_line: common.LineSink | None = None,
        on_measuring: common.MeasuringSink | None = None) -> RunResult:
    """Run ``tpcc_start`` with cfg's warehouses, clients, ramp-up (-r), duration (-l) and interval (-i)."""
    start, loaded = common.prepare_run(spec, cfg, WAREHOUSE_TABLE, name, "tpcc-mysql", find_tool,
                                       keying_supported=False)
    warmup, duration, interval = common.whole_seconds(cfg)

    def execute(account: common.BenchAccount, window: common.CounterWindow) -> common.Measured:
        def watch(line: str) -> None:  # sample the server counters exactly around tpcc_start's measured phase
            if MEASURING_START in line:
                window.start()
                if on_measuring:
                    on_measuring(float(duration))
            elif STOPPING in line:
                window.stop()

        argv = [start] + _connection_args(account, cfg.database) + [
            "-w", str(loaded), "-c", str(cfg.clients), "-r", str(warmup), "-l", str(duration), "-i", str(interval)]
        out = common.run_tool(argv, cwd=os.path.dirname(start), timeout=warmup + duration + 120 + cfg.clients,
                              secrets_=(account.password,), on_line=on_line, watch=watch)
        return common.Measured([("ramp-up and measured", out)], out)

    peer = common.PeerRun(tool=name, label="tpcc_start", path=start, mode=MODE, runs_as="client-side statements",
                          district_table=DISTRICT_TABLE, counters_note="at MEASURING START and STOPPING THREADS",
                          parse=parse_output, execute=execute)
    result, _ = common.run_measured(spec, cfg, peer, common.run_settings(cfg, loaded, common.endpoint(spec),
                                                                         rampup_seconds=warmup))
    return result
