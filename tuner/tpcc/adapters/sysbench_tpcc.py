"""sysbench-tpcc (Percona-Lab/sysbench-tpcc, Lua scripts run by sysbench 1.0) as an external driver.

The tool is a checkout holding ``tpcc.lua`` (with tpcc_common.lua, tpcc_run.lua,
tpcc_check.lua beside it), run from that directory as ``sysbench ./tpcc.lua``
with Debian's ``sysbench``.  One table set (``--tables=1``), so table names carry
the suffix 1 (district1, warehouse1).  Transactions are client-side statements.

Credentials: sysbench takes ``--mysql-password`` as an option; the adapter puts
all connection options in a 0600 ``--config-file`` (sysbench's "file containing
command line options") and uses a temporary account scoped to the database
(``_common.bench_account``), so neither the caller's password nor the temporary
one appears in argv.

Output (the peer-output fixture's README): no tpmC is printed; transactions and
latency cover the five types together (mix 10:10:1:1:1 of 23, tpcc.lua event()).
Only one percentile is printed (--percentile, default 95); the others come from
the ``--histogram=on`` table (values in ms, log-scale buckets): the value of the
first bucket whose cumulative count reaches ceil(N * p / 100), which reproduces
the printed 95th.  "ignored errors" are deadlocks and lock waits after which
sysbench rolls back and restarts the event (tpcc.lua before_restart_event), so
they are retries.  sysbench 1.0 has no warm-up option: the warm-up is a separate
run, as the fixture was made.  NOPM and TPM come from the server's counters
(HammerDB's definitions) sampled from "Threads started!" to the end of the run.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time

from tuner.core.errors import ToolMissing, UsageError
from tuner.core.measure import RunResult
from tuner.core.optionfile import private_option_file
from tuner.core.server import ConnectionSpec
from tuner.tpcc.adapters import _common as common
from tuner.tpcc.config import RunConfig

name = "sysbench-tpcc"
MODE = "statements"
TABLE_SET = 1
DISTRICT_TABLE = f"district{TABLE_SET}"
WAREHOUSE_TABLE = f"warehouse{TABLE_SET}"
SCRIPT = "tpcc.lua"
SHARE_DIRS = ("/usr/local/share/sysbench", "/usr/share/sysbench")  # where sysbench looks for bundled scripts
HOW_TO_GET = ("apt-get install sysbench, git clone https://github.com/Percona-Lab/sysbench-tpcc and pass "
              "--tool-path /path/to/sysbench-tpcc")
DEFAULT_LOAD_THREADS = 4

NUM = r"(\d+(?:\.\d+)?)"
THREADS_RE = re.compile(r"Number of threads: (\d+)")
INTERVAL_RE = re.compile(
    rf"^\[\s*(\d+)s \] thds: (\d+) tps: {NUM} qps: {NUM} \(r/w/o: [^)]*\) lat \(ms,(\d+)%\): {NUM} "
    rf"err/s:? {NUM} reconn/s: {NUM}", re.M)
HISTOGRAM_HEADER = "Latency histogram (values are in milliseconds)"
HISTOGRAM_ROW_RE = re.compile(r"^\s*(\d+(?:\.\d+)?) \|[* ]*?\s*(\d+)\s*$")
TRANSACTIONS_RE = re.compile(rf"transactions:\s+(\d+)\s+\({NUM} per sec\.\)")
IGNORED_RE = re.compile(rf"ignored errors:\s+(\d+)\s+\({NUM} per sec\.\)")
RECONNECTS_RE = re.compile(r"reconnects:\s+(\d+)\s+\(")
TOTAL_TIME_RE = re.compile(rf"total time:\s+{NUM}s")
LAT_RE = {k: re.compile(rf"^\s+{k}:\s+{NUM}\s*$", re.M) for k in ("min", "avg", "max")}
PRINTED_PCT_RE = re.compile(rf"(\d+)th percentile:\s+{NUM}")
THREADS_STARTED = "Threads started!"
RUN_FINISHED = (HISTOGRAM_HEADER, "SQL statistics:")


# ---------------------------------------------------------------------------
# Parsing


def histogram(text: str) -> list[tuple[float, int]]:
    """(value ms, count) rows of the --histogram=on table."""
    rows: list[tuple[float, int]] = []
    lines = text.splitlines()
    try:
        i = next(k for k, ln in enumerate(lines) if HISTOGRAM_HEADER in ln)
    except StopIteration:
        return rows
    for ln in lines[i + 2:]:
        m = HISTOGRAM_ROW_RE.match(ln)
        if not m:
            break
        rows.append((float(m.group(1)), int(m.group(2))))
    return rows


def histogram_percentile(rows: list[tuple[float, int]], p: float) -> float | None:
    total = sum(c for _, c in rows)
    if not total:
        return None
    rank = max(1, math.ceil(total * p / 100.0))
    seen = 0
    for value, count in rows:
        seen += count
        if seen >= rank:
            return value
    return rows[-1][0]


def _timeline(text: str) -> list[dict]:
    points, prev = [], 0
    for m in INTERVAL_RE.finditer(text):
        t = int(m.group(1))
        secs = float(t - prev) or 1.0
        prev = t
        tps, pct, lat, err = float(m.group(3)), m.group(5), float(m.group(6)), float(m.group(7))
        points.append({"t": float(t), "seconds": secs, "tpmc": None, "tpm_total": round(tps * 60.0, 1),
                       "commits": {}, "errors": 0, "retries": round(err * secs),
                       "latency_ms": {"all": {f"p{pct}": lat}}, "tps": tps})
    return points


def _float(rx: re.Pattern, text: str) -> float | None:
    m = rx.search(text)
    return float(m.group(1)) if m else None


def parse_output(text: str) -> RunResult:
    """``sysbench tpcc.lua ... --histogram=on run`` console output -> RunResult (tps, latency of all types)."""
    threads = THREADS_RE.search(text)
    trx = TRANSACTIONS_RE.search(text)
    ignored = IGNORED_RE.search(text)
    reconnects = RECONNECTS_RE.search(text)
    total_time = _float(TOTAL_TIME_RE, text)
    rows = histogram(text)
    latency: dict[str, float] = {}
    for p in (50, 90, 99):
        v = histogram_percentile(rows, p)
        if v is not None:
            latency[f"p{p}"] = v
    for pct, value in PRINTED_PCT_RE.findall(text):
        latency[f"p{pct}"] = float(value)  # sysbench's own figure wins over the histogram's
    for k, rx in LAT_RE.items():
        v = _float(rx, text)
        if v is not None:
            latency[k] = v
    if trx:
        latency["count"] = int(trx.group(1))
    failure = None if trx else "sysbench printed no final statistics; the run did not finish"
    extra: dict = {}
    if trx:
        extra["transactions"] = int(trx.group(1))
    if ignored:
        extra["ignored_errors"] = int(ignored.group(1))
    if reconnects:
        extra["reconnects"] = int(reconnects.group(1))
    if rows:
        extra["histogram_count"] = sum(c for _, c in rows)
    extra["latency_scope"] = "all five transaction types together"
    return RunResult(
        driver=name, mode=MODE, warehouses=None, clients=int(threads.group(1)) if threads else None,
        warmup_seconds=None, measured_seconds=total_time, tpmc=None,
        tps=float(trx.group(2)) if trx else None,
        latency_ms={"all": latency} if latency else {}, timeline=_timeline(text),
        retries=int(ignored.group(1)) if ignored else 0,
        complete=failure is None, failure=failure, extra=extra)


# ---------------------------------------------------------------------------
# The tool


def find_tool(tool_path: str | None = None) -> str:
    """Path of ``tpcc.lua`` (from --tool-path, file or checkout directory, or PATH and sysbench's share dirs)."""
    script = _find_script(tool_path)
    common.require_program("sysbench", "sysbench-tpcc", HOW_TO_GET)
    return script


def _find_script(tool_path: str | None) -> str:
    if tool_path:
        p = os.path.abspath(os.path.expanduser(tool_path))
        script = os.path.join(p, SCRIPT) if os.path.isdir(p) else p
        if os.path.basename(script) == SCRIPT and os.path.isfile(script):
            return script
        raise ToolMissing(f"sysbench-tpcc: --tool-path {tool_path} is not {SCRIPT} nor a directory holding it; "
                          f"{HOW_TO_GET}")
    for d in os.environ.get("PATH", "").split(os.pathsep) + list(SHARE_DIRS):
        script = os.path.join(d, SCRIPT)
        if d and os.path.isfile(script):
            return os.path.abspath(script)
    where = " or in ".join(["PATH"] + [", ".join(SHARE_DIRS)] if SHARE_DIRS else ["PATH"])
    raise ToolMissing(f"sysbench-tpcc ({SCRIPT}) was not found on {where}; {HOW_TO_GET}")


@contextlib.contextmanager
def _config_file(account: common.BenchAccount, database: str):
    """sysbench --config-file with the connection options (0600, removed afterwards)."""
    lines = ["db-driver=mysql", f"mysql-host={account.endpoint.host}", f"mysql-port={account.endpoint.port}",
             f"mysql-user={account.user}", f"mysql-password={account.password}", f"mysql-db={database}"]
    with private_option_file(lines, prefix="innotier-sysbench-", suffix=".cfg") as path:
        yield path


def _argv(script: str, config: str, warehouses: int, threads: int, *rest: str) -> list[str]:
    return [common.require_program("sysbench", "sysbench-tpcc", HOW_TO_GET), f"--config-file={config}",
            f"./{SCRIPT}", f"--tables={TABLE_SET}", f"--scale={warehouses}", f"--threads={threads}", *rest]


def load(spec: ConnectionSpec, warehouses: int, database: str = "tpcc", tool_path: str | None = None, *,
         drop: bool = False, jobs: int | None = None, on_line: common.LineSink | None = None) -> float:
    """``sysbench tpcc.lua prepare`` into ``database`` (created first); return seconds taken.

    prepare sleeps 30 s by design ("Waiting on tables 30 sec", tpcc_common.lua).
    """
    if warehouses < 1:
        raise UsageError(f"--warehouses {warehouses} is not valid; give 1 or more")
    common.check_database_name(database)
    script = find_tool(tool_path)
    common.prepare_database(spec, database, drop, "sysbench-tpcc")
    t0 = time.monotonic()
    with common.bench_account(spec, database) as account, _config_file(account, database) as cfg_file:
        out = common.run_tool(_argv(script, cfg_file, warehouses, jobs or DEFAULT_LOAD_THREADS, "prepare"),
                              cwd=os.path.dirname(script), timeout=600 + 300 * warehouses,
                              secrets_=(account.password,), on_line=on_line)
    common.check_ran(out, "sysbench-tpcc prepare")
    common.verify_loaded(spec, database, WAREHOUSE_TABLE, name, "sysbench-tpcc", warehouses)
    return time.monotonic() - t0


CHECK_LINE = re.compile(r"^Check (\d+), warehouse: (\d+) (PASSED|FAILED)", re.M)


def parse_check(text: str) -> tuple[bool, str]:
    """(all passed, failures) from ``tpcc.lua check`` output (tpcc_check.lua: "Check N, warehouse: W PASSED")."""
    lines = CHECK_LINE.findall(text)
    failed = [f"check {c} warehouse {w}" for c, w, verdict in lines if verdict == "FAILED"]
    if not lines:
        return False, "sysbench-tpcc check printed no verdict"
    return not failed, (f"{len(lines)} checks, failed: " + ", ".join(failed)) if failed else f"{len(lines)} checks passed"


def check(spec: ConnectionSpec, warehouses: int, database: str = "tpcc", tool_path: str | None = None,
          on_line: common.LineSink | None = None) -> tuple[bool, str]:
    """sysbench-tpcc's own consistency check (``tpcc.lua check``, its tables are suffixed: district1, ...)."""
    script = find_tool(tool_path)
    with common.bench_account(spec, database) as account, _config_file(account, database) as cfg_file:
        out = common.run_tool(_argv(script, cfg_file, warehouses, 1, "check"), cwd=os.path.dirname(script),
                              timeout=300 + 60 * warehouses, secrets_=(account.password,), on_line=on_line)
    common.check_ran(out, "sysbench-tpcc check")
    return parse_check(out.text)


def run(spec: ConnectionSpec, cfg: RunConfig, *, on_line: common.LineSink | None = None,
        on_measuring: common.MeasuringSink | None = None) -> RunResult:
    """A warm-up run (--time=warm-up) then the measured run (--time=duration --histogram=on)."""
    script, loaded = common.prepare_run(spec, cfg, WAREHOUSE_TABLE, name, "sysbench-tpcc", find_tool,
                                       keying_supported=False)
    warmup, duration, interval = common.whole_seconds(cfg)

    def execute(account: common.BenchAccount, window: common.CounterWindow) -> common.Measured:
        def watch(line: str) -> None:
            if THREADS_STARTED in line:
                window.start()
                if on_measuring:
                    on_measuring(float(duration))
            elif any(marker in line for marker in RUN_FINISHED):
                window.stop()

        warm = None
        with _config_file(account, cfg.database) as cfg_file:
            if warmup:
                warm = common.run_tool(_argv(script, cfg_file, loaded, cfg.clients, f"--time={warmup}", "run"),
                                       cwd=os.path.dirname(script), timeout=warmup + 120 + cfg.clients,
                                       secrets_=(account.password,), on_line=on_line)
                common.check_ran(warm, "sysbench-tpcc warm-up run")
            out = common.run_tool(_argv(script, cfg_file, loaded, cfg.clients, f"--time={duration}",
                                        f"--report-interval={interval}", "--histogram=on", "run"),
                                  cwd=os.path.dirname(script), timeout=duration + 120 + cfg.clients,
                                  secrets_=(account.password,), on_line=on_line, watch=watch)
        return common.Measured([("warm-up", warm), ("measured", out)], out)

    peer = common.PeerRun(tool=name, label="sysbench-tpcc run", path=script, mode=MODE,
                          runs_as="client-side statements", district_table=DISTRICT_TABLE,
                          counters_note="from 'Threads started!' to the end of the measured run",
                          parse=parse_output, execute=execute)
    result, done = common.run_measured(spec, cfg, peer, common.run_settings(cfg, loaded, common.endpoint(spec)))
    result.warehouses = loaded
    result.warmup_seconds = float(warmup)
    warm = done.runs[0][1]
    if warm is not None:
        result.extra["warmup_tps"] = parse_output(warm.text).tps
    return result
