"""HammerDB (TPC-Council/HammerDB 4.12, MySQL TPROC-C workload) as an external driver.

HammerDB runs from its source tree with ``tclsh8.6 hammerdbcli auto SCRIPT.tcl``
(Debian packages tcl8.6 mysqltcl tcl-thread libsqlite3-tcl tcl-expect tcllib,
and ticklecharts 3.1 on TCLLIBPATH; HEAD needs Tcl 9).  Its workload runs as
stored procedures, so results are labelled mode ``procedures``.

Credentials: HammerDB reads the password from the Tcl script (``diset tpcc
mysql_pass``), never from argv.  The script is written 0600 into a private 0700
directory that is also HammerDB's TMP (where it keeps its settings databases,
which persist every ``diset`` value, the password included, and its log); the
whole directory is removed after the run.  The console echoes ``diset`` values,
so the output is redacted before it is shown or kept.

What HammerDB reports (src/mysql/mysqloltp.tcl, timed driver):
NOPM = growth of sum(d_next_o_id) per minute; TPM = growth of Com_commit +
Com_rollback per minute (server-wide), over the timed window after the ramp-up.
With ``mysql_timeprofile true``, ``jobs ID timing`` prints per stored-procedure
times in ms (p50/p95/p99/min/avg/max, calls); these cover all virtual users for
the whole run, ramp-up included (the peer-output fixture's README).  So the
warm-up is a separate HammerDB run (ramp-up 0, duration = the warm-up) and the
measured run has no ramp-up: its profile covers the measured minutes only.
HammerDB 4.12's xtprof appends each virtual user's sample list twice when it
gathers them, so ``calls`` is twice the real count (the recorded fixture's
``ratio_pct`` values sum to 198%): the count is halved; percentiles, min, max and
average are unchanged by the duplication.  HammerDB prints no client-side
New-Order count, so ``tpmc`` stays None: use ``nopm``.

The measured phase starts late: each HammerDB process takes seconds to start
(the CLI, its settings databases, the virtual users) and more to end (the
virtual users finish their current batch, xtprof gathers, the CLI polls every
5 s), and the times are whole 6-second steps, so the measured run's "Timing
test period" line comes many seconds after the warm-up asked for (a measured
case is in docs/benchmarks.md).  ``run()`` calls
``on_measuring(seconds)`` when that line arrives (the console streams it as it
happens), so a harness counting on its own (``tuner.tpcc.compare``) counts from
there.  The time profile's calls also include the transactions the virtual
users finish after the timed period.

Consistency (``check()``: innotier's conditions on HammerDB's schema, whose
names are TPC-C's): HammerDB 4.12's MySQL PAYMENT adds H_AMOUNT to C_BALANCE
(TPC-C 2.5.2.2 subtracts it) and updates neither C_YTD_PAYMENT nor
C_PAYMENT_CNT, so conditions 3.3.2.10 and 3.3.2.12 break for every customer
that received a payment; the check names them as HammerDB's known deviations.

Errors: a failing stored procedure prints the server's message on the virtual
user's line ("Vuser 3:Deadlock found when trying to get lock; ...", "Lock wait
timeout exceeded; ..."), which need not contain the word "error": all three are
counted.

Time granularity: the timed driver counts ramp-up and duration in 6-second
steps and loops ``while {$t != $minutes*60000}``, so a value such as 4.1 minutes
(245999.99999 ms in floating point) would never end.  ``minutes_for()`` picks
the nearest exact tenth of a minute and the result records the times used.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time

from tuner.core.errors import ToolMissing, UsageError
from tuner.core.measure import RunResult
from tuner.core.server import ConnectionSpec
from tuner.tpcc.adapters import _common as common
from tuner.tpcc.config import RunConfig

name = "hammerdb"
MODE = "procedures"
DISTRICT_TABLE = "district"
WAREHOUSE_TABLE = "warehouse"
TCLSH = "tclsh8.6"
HOW_TO_GET = ("get HammerDB 4.12 from https://github.com/TPC-Council/HammerDB (git checkout v4.12; it runs from "
              "source with apt-get install tcl8.6 mysqltcl tcl-thread libsqlite3-tcl tcl-expect tcllib and "
              "ticklecharts 3.1 on TCLLIBPATH) and pass --tool-path /path/to/HammerDB")

# HammerDB stored procedure -> our op name
PROCEDURES = {"NEWORD": "new_order", "PAYMENT": "payment", "DELIVERY": "delivery", "SLEV": "stock_level",
              "OSTAT": "order_status"}
TIMING_FIELDS = {"p50_ms": "p50", "p95_ms": "p95", "p99_ms": "p99", "min_ms": "min", "avg_ms": "avg",
                 "max_ms": "max"}

TEST_RESULT_RE = re.compile(r"TEST RESULT : System achieved (\d+(?:\.\d+)?) NOPM from (\d+(?:\.\d+)?) (\S+) TPM")
# (fractional when the duration is not whole minutes: tpm = (end - start) / durmin in mysqloltp.tcl)
VUSERS_RE = re.compile(r"(\d+) Active Virtual Users configured")
RAMPUP_RE = re.compile(r"Beginning rampup time of ([\d.]+) minutes")
DURATION_RE = re.compile(r"Timing test period of ([\d.]+) in minutes")
VUSER_ERROR_RE = re.compile(r"^Vuser \d+:.*(?:\b(?:[Ee]rror|ERROR)\b|Deadlock found|Lock wait timeout)", re.M)
# xtprof (HammerDB 4.12) appends every virtual user's samples twice: "calls" counts each call twice.
XTPROF_DUPLICATION = 2
FAILED_RE = re.compile(r"^Vuser (\d+):FINISHED FAILED", re.M)
MISSING_PACKAGE_RE = re.compile(r"can't find package (\S+)")
LOAD_DONE_RE = re.compile(r"^Vuser 1:\S+ SCHEMA COMPLETE", re.M)  # "<DATABASE> SCHEMA COMPLETE", upper-cased

TIME_STEP_SECONDS = 6  # the timed driver's polling step (mysqloltp.tcl: after 6000)


# ---------------------------------------------------------------------------
# Parsing


def _timing_json(text: str) -> dict | None:
    """The object printed by ``jobs ID timing``: a JSON object keyed by stored procedure."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"^\{", text, re.M):
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(obj, dict) and any(k in obj for k in PROCEDURES):
            return obj
    return None


def _latency(timing: dict) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for proc, op in PROCEDURES.items():
        t = timing.get(proc)
        if not isinstance(t, dict):
            continue
        row = {ours: float(t[theirs]) for theirs, ours in TIMING_FIELDS.items() if theirs in t}
        if "calls" in t:
            row["count"] = int(float(t["calls"])) // XTPROF_DUPLICATION
        out[op] = row
    return out


def parse_output(text: str) -> RunResult:
    """A HammerDB timed run's console output (``jobs ID result`` and ``jobs ID timing`` included) -> RunResult."""
    text = text.replace("\r", "")
    result = TEST_RESULT_RE.search(text)
    vusers = VUSERS_RE.search(text)
    rampup = RAMPUP_RE.search(text)
    duration = DURATION_RE.search(text)
    timing = _timing_json(text)
    failed = FAILED_RE.findall(text)
    failure = None
    if not result:
        failure = "HammerDB printed no TEST RESULT line"
    elif failed:
        failure = f"virtual user(s) {', '.join(failed)} finished FAILED"
    extra: dict = {}
    if result:
        extra["tpm_source"] = f"{result.group(3)} Com_commit + Com_rollback (server-wide)"
    if timing:
        extra["latency_scope"] = ("HammerDB time profile: all virtual users, the whole HammerDB run (the adapter "
                                  "runs the warm-up separately, so ramp-up is excluded); calls halved (xtprof "
                                  "counts each twice)")
    return RunResult(
        driver=name, mode=MODE, warehouses=None,
        clients=int(vusers.group(1)) if vusers else None,
        warmup_seconds=round(float(rampup.group(1)) * 60, 3) if rampup else None,
        measured_seconds=round(float(duration.group(1)) * 60, 3) if duration else None,
        tpmc=None,
        nopm=round(float(result.group(1)), 1) if result else None,
        tpm=round(float(result.group(2)), 1) if result else None,
        latency_ms=_latency(timing) if timing else {},
        errors=len(VUSER_ERROR_RE.findall(text)),
        complete=failure is None, failure=failure, extra=extra)


# ---------------------------------------------------------------------------
# The tool


def find_tool(tool_path: str | None = None) -> str:
    """Path of ``hammerdbcli`` (from --tool-path, file or HammerDB directory, or PATH); tclsh8.6 must exist too."""
    cli = common.find_program(("hammerdbcli",), tool_path, "HammerDB", HOW_TO_GET)
    common.require_program(TCLSH, "HammerDB", "apt-get install tcl8.6")
    return cli


def tcl_word(value: str) -> str:
    """One Tcl word for ``value``: bare if safe, else double-quoted with the substitution characters escaped."""
    if "\n" in value or "\r" in value:
        raise UsageError("a HammerDB setting contains a line break; remove it")
    if re.fullmatch(r"[A-Za-z0-9_.:/@%+=,-]+", value):
        return value
    return '"' + re.sub(r'([\\$\[\]"{}])', r"\\\1", value) + '"'


def minutes_for(seconds: float, minimum_steps: int = 0) -> str:
    """HammerDB minutes (a tenth-of-a-minute multiple) nearest ``seconds`` that the timed driver can reach exactly."""
    want = max(minimum_steps, round(seconds / TIME_STEP_SECONDS))
    for delta in (0, 1, -1, 2, -2, 3, -3):
        k = want + delta
        if k < minimum_steps:
            continue
        text = f"{k / 10:g}"
        if float(text) * 60000 == k * TIME_STEP_SECONDS * 1000:  # Tcl: expr {$min*60000} compared with 6000 steps
            return text
    return f"{max(1, round(want / 10))}"  # whole minutes are always exact


def _connection_lines(spec: ConnectionSpec, database: str) -> list[str]:
    where = common.endpoint(spec)
    return [
        "dbset db mysql",
        "dbset bm TPC-C",
        f"diset connection mysql_host {tcl_word(where.host)}",
        f"diset connection mysql_port {where.port}",
        "diset connection mysql_socket null",
        f"diset tpcc mysql_user {tcl_word(spec.user)}",
        f"diset tpcc mysql_pass {tcl_word(spec.password or '')}",
        f"diset tpcc mysql_dbase {tcl_word(database)}",
    ]


def load_script(spec: ConnectionSpec, warehouses: int, database: str, virtual_users: int) -> str:
    return "\n".join(_connection_lines(spec, database) + [
        f"diset tpcc mysql_count_ware {warehouses}",
        f"diset tpcc mysql_num_vu {virtual_users}",
        "diset tpcc mysql_storage_engine innodb",
        "diset tpcc mysql_partition false",
        "buildschema",
        "vudestroy",
        "exit",
    ]) + "\n"


def run_script(spec: ConnectionSpec, cfg: RunConfig, rampup: str, duration: str) -> str:
    return "\n".join(_connection_lines(spec, cfg.database) + [
        "diset tpcc mysql_driver timed",
        f"diset tpcc mysql_rampup {rampup}",
        f"diset tpcc mysql_duration {duration}",
        "diset tpcc mysql_total_iterations 10000000",
        "diset tpcc mysql_allwarehouse false",
        f"diset tpcc mysql_keyandthink {'true' if cfg.keying_and_think else 'false'}",
        "diset tpcc mysql_timeprofile true",
        "loadscript",
        f"vuset vu {cfg.clients}",
        "vuset logtotemp 1",
        "vucreate",
        "set runmsg [vurun]",
        "_waittocomplete",
        "vudestroy",
        'if {[regexp {jobid=([0-9A-F]+)} $runmsg -> jobid]} {puts "JOBID $jobid"; jobs $jobid result; '
        "jobs $jobid timing}",
        "exit",
    ]) + "\n"


@contextlib.contextmanager
def private_tmp():
    """A 0700 directory used as HammerDB's TMP and for the 0600 script; removed afterwards."""
    d = tempfile.mkdtemp(prefix="innotier-hammerdb-")
    try:
        os.chmod(d, 0o700)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def write_script(directory: str, script: str) -> str:
    """The Tcl script (it holds the password) as a new 0600 file in ``directory``."""
    path = os.path.join(directory, "innotier.tcl")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(script)
    return path


def masked_script(script: str, spec: ConnectionSpec) -> str:
    return common.redact(script, (spec.password or "",))


def _run_hammerdb(cli: str, script: str, spec: ConnectionSpec, timeout: float, on_line, watch=None):
    with private_tmp() as tmp:
        path = write_script(tmp, script)
        env = {"TMP": tmp}
        out = common.run_tool([common.require_program(TCLSH, "HammerDB", "apt-get install tcl8.6"), cli, "auto",
                               path], cwd=os.path.dirname(cli), env=env, timeout=timeout,
                              secrets_=(spec.password or "",), on_line=on_line, watch=watch)
    missing = MISSING_PACKAGE_RE.search(out.text)
    if missing:
        raise ToolMissing(f"HammerDB cannot load the Tcl package {missing.group(1)}; install it (apt-get install "
                          "mysqltcl tcl-thread libsqlite3-tcl tcl-expect tcllib; ticklecharts 3.1 goes on "
                          "TCLLIBPATH) and run again")
    return out


def load(spec: ConnectionSpec, warehouses: int, database: str = "tpcc", tool_path: str | None = None, *,
         drop: bool = False, jobs: int | None = None, on_line: common.LineSink | None = None) -> float:
    """Build HammerDB's own schema (tables, stored procedures) in ``database``; return seconds taken.

    ``jobs``: HammerDB's build virtual users (default 4, at most one per warehouse).
    """
    if warehouses < 1:
        raise UsageError(f"--warehouses {warehouses} is not valid; give 1 or more")
    common.check_database_name(database)
    cli = find_tool(tool_path)
    # HammerDB creates the database itself (latin1, mysqloltp.tcl) and accepts an empty one
    common.prepare_database(spec, database, drop, "HammerDB", create=False)
    vus = max(1, min(warehouses, jobs or 4))
    t0 = time.monotonic()
    out = _run_hammerdb(cli, load_script(spec, warehouses, database, vus), spec,
                        timeout=600 + 120 * warehouses, on_line=on_line)
    text = out.text.replace("\r", "")
    common.check_ran(out, "HammerDB buildschema", ok=bool(LOAD_DONE_RE.search(text)) and not FAILED_RE.search(text))
    common.verify_loaded(spec, database, WAREHOUSE_TABLE, name, "HammerDB", warehouses)
    return time.monotonic() - t0


CHECK_BY = common.CONDITIONS_CHECK_BY  # check() runs ours, not a check of the peer's
# Conditions HammerDB's own transactions break (src/mysql/mysqloltp.tcl, PAYMENT: "SET p_c_balance =
# ( p_c_balance + p_h_amount )" and "UPDATE customer SET c_balance = p_c_balance"; no C_YTD_PAYMENT).
KNOWN_DEVIATIONS = {
    "3.3.2.10": "HammerDB's PAYMENT adds H_AMOUNT to C_BALANCE and does not keep C_YTD_PAYMENT (clause 2.5.2.2)",
    "3.3.2.12": "HammerDB's PAYMENT adds H_AMOUNT to C_BALANCE and does not keep C_YTD_PAYMENT (clause 2.5.2.2)",
}


def check(spec: ConnectionSpec, warehouses: int, database: str = "tpcc", tool_path: str | None = None,
          on_line: common.LineSink | None = None) -> tuple[bool, str]:
    """innotier's TPC-C consistency conditions on HammerDB's schema, its known deviations named."""
    common.check_database_name(database)
    return common.conditions_check(spec, database, KNOWN_DEVIATIONS)


def measuring_watch(on_measuring: common.MeasuringSink | None):
    """A ``run_tool`` watch calling ``on_measuring(seconds)`` once, when the monitor virtual user starts its timed
    period ("Timing test period of X in minutes", printed right after it takes the start counts)."""
    if on_measuring is None:
        return None
    fired = []

    def watch(line: str) -> None:
        m = DURATION_RE.search(line)
        if m and not fired:
            fired.append(line)
            on_measuring(round(float(m.group(1)) * 60, 3))

    return watch


def run(spec: ConnectionSpec, cfg: RunConfig, *, on_line: common.LineSink | None = None,
        on_measuring: common.MeasuringSink | None = None) -> RunResult:
    """Run HammerDB's timed driver on its loaded schema: a warm-up run, then the measured run without ramp-up."""
    cli, loaded = common.prepare_run(spec, cfg, WAREHOUSE_TABLE, name, "HammerDB", find_tool)
    rampup = "0"
    duration = minutes_for(cfg.duration, minimum_steps=1)
    warm = None
    scripts = {}
    if cfg.warmup > 0:
        warm_minutes = minutes_for(cfg.warmup, minimum_steps=1)
        script = run_script(spec, cfg, "0", warm_minutes)
        scripts["warm-up"] = masked_script(script, spec)
        warm = _run_hammerdb(cli, script, spec, timeout=float(warm_minutes) * 60 + 180 + cfg.clients,
                             on_line=on_line)
        if parse_output(warm.text).nopm is None:
            common.check_ran(warm, "HammerDB warm-up run", ok=False)
    script = run_script(spec, cfg, rampup, duration)
    scripts["measured"] = masked_script(script, spec)
    timeout = float(duration) * 60 + 180 + cfg.clients
    out = _run_hammerdb(cli, script, spec, timeout=timeout, on_line=on_line, watch=measuring_watch(on_measuring))
    result = parse_output(out.text)
    result.warmup_seconds = float(cfg.warmup)
    common.record_commands(result, [("warm-up", warm), ("measured", out)],
                           common.run_settings(cfg, loaded, common.endpoint(spec), rampup_minutes=rampup,
                                               duration_minutes=duration, driver="timed", timeprofile=True),
                           scripts)
    if out.timed_out or (out.returncode != 0 and result.nopm is None):
        common.check_ran(out, "HammerDB run")
    result.warehouses = loaded
    result.clients = result.clients or cfg.clients
    result.extra.update({"tool": cli, "requested_warmup_seconds": cfg.warmup,
                         "requested_duration_seconds": cfg.duration, "rampup_minutes": rampup,
                         "duration_minutes": duration})
    if cfg.mode != MODE:
        result.extra["note"] = f"HammerDB runs stored procedures; --mode {cfg.mode} does not apply"
    return result
