"""What every peer adapter shares: finding the tool, a scoped benchmark account, running the tool, server counters.

Side effects live here, at the edge; the per-tool modules build argv and parse text.

Credentials.  Three peers take a password only on their command line
(tpcc-mysql ``-p``, go-tpc ``-p``, sysbench ``--mysql-password``), where any
local user can read it in ``/proc/PID/cmdline`` and tpcc-mysql even prints it
back.  Those peers never get the caller's (for a sandbox: root's) password:
``bench_account()`` creates a throw-away account ``innotier_peer_<hex>`` with a
random password, granted ALL on the peer's own database only, from the one
client address the peer connects from, and drops it when the run ends (also on
error).  Whoever reads that argv can at most touch a benchmark database for the
minutes the run lasts.  Tool output is redacted before it is echoed or kept.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from tuner.core.errors import ServerError, ToolMissing, UsageError, WorkloadError
from tuner.core.server import ConnectionSpec
from tuner.tpcc import check as tpcc_check
from tuner.tpcc import mix

LineSink = Callable[[str], None]
# Called once, when the peer's measured phase starts, with that phase's length in seconds as the peer runs it
# (a harness that counts on its own, such as tuner.tpcc.compare, anchors its window there: a peer whose warm-up
# is a separate process starts measuring later than ``warmup`` seconds after the run began).
MeasuringSink = Callable[[float], None]

DB_NAME_RE = re.compile(r"^[A-Za-z0-9_]{1,64}$")

SQL_CREATE_ACCOUNT = "CREATE USER %s@%s IDENTIFIED BY %s"
SQL_DROP_ACCOUNT = "DROP USER IF EXISTS %s@%s"
SQL_GRANT_DATABASE = "GRANT ALL PRIVILEGES ON `{db}`.* TO %s@%s"
SQL_CLIENT_HOST = "SELECT SUBSTRING_INDEX(USER(), '@', -1)"
SQL_PORT = "SELECT @@port"
SQL_MAX_CONNECTIONS = "SELECT @@max_connections"
SQL_COUNT_TABLES = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s"
SQL_CREATE_DATABASE = "CREATE DATABASE IF NOT EXISTS `{db}`"
SQL_TRANSACTION_COUNTERS = ("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback')")
# HammerDB's NOPM: growth of sum(d_next_o_id) (src/mysql/mysqloltp.tcl, "select sum(d_next_o_id) from district")
SQL_SUM_NEXT_ORDER_ID = "SELECT SUM(d_next_o_id) FROM `{db}`.`{table}`"
SQL_COUNT_WAREHOUSES = "SELECT COUNT(*) FROM `{db}`.`{table}`"

LOOPBACK = ("127.0.0.1", "localhost", "::1")


# ---------------------------------------------------------------------------
# Finding tools


def executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_program(names: tuple[str, ...], tool_path: str | None, label: str, how: str) -> str:
    """A program from --tool-path (the file, or a directory holding it) or from PATH; else ToolMissing."""
    if tool_path:
        p = os.path.abspath(os.path.expanduser(tool_path))
        candidates = [os.path.join(p, n) for n in names] if os.path.isdir(p) else [p]
        for c in candidates:
            if executable(c) and os.path.basename(c) in names:
                return c
        raise ToolMissing(f"{label}: --tool-path {tool_path} is not {' or '.join(names)} nor a directory holding it; "
                          f"{how}")
    for n in names:
        found = shutil.which(n)
        if found:
            return os.path.abspath(found)
    raise ToolMissing(f"{label} ({' or '.join(names)}) is not on PATH; {how}")


def require_program(name: str, label: str, how: str) -> str:
    found = shutil.which(name)
    if not found:
        raise ToolMissing(f"{label} needs {name}, which is not on PATH; {how}")
    return found


# ---------------------------------------------------------------------------
# Where the peer connects


@dataclass(frozen=True)
class Endpoint:
    """The TCP address a peer connects to (peers are run over TCP, as in the recorded fixtures)."""

    host: str
    port: int


def check_database_name(database: str) -> str:
    if not DB_NAME_RE.match(database or ""):
        raise UsageError(f"database name {database!r} is not valid for a peer tool; use letters, digits and _")
    return database


def admin_connection(spec: ConnectionSpec):
    return spec.with_database(None).connect()


def query_one(conn, sql: str, params: tuple = ()):
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        row = cur.fetchone()
        while cur.fetchone() is not None:
            pass
    finally:
        cur.close()
    if row is None:
        return None
    v = row[0]
    return v.decode() if isinstance(v, (bytes, bytearray)) else v


def execute(conn, sql: str, params: tuple = ()) -> None:
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
    finally:
        cur.close()


def endpoint(spec: ConnectionSpec, conn=None) -> Endpoint:
    """TCP host and port of the server: the spec's, or 127.0.0.1 and @@port for a socket spec."""
    if spec.host or spec.port:
        return Endpoint(spec.host or "127.0.0.1", int(spec.port or 3306))
    own = conn is None
    conn = conn or admin_connection(spec)
    try:
        port = int(query_one(conn, SQL_PORT))
    finally:
        if own:
            conn.close()
    if port <= 0:
        raise ServerError(f"{spec.describe()} does not listen on TCP (port {port}); peer tools need TCP: "
                          "start it without skip-networking")
    return Endpoint("127.0.0.1", port)


def tcp_spec(spec: ConnectionSpec, where: Endpoint) -> ConnectionSpec:
    s = spec.with_database(None)
    s.socket, s.host, s.port = None, where.host, where.port
    return s


def client_host(spec: ConnectionSpec, where: Endpoint) -> str:
    """The address the server sees for a TCP client of this machine (the account's host part)."""
    if where.host in LOOPBACK:
        return "127.0.0.1"
    conn = tcp_spec(spec, where).connect()
    try:
        return str(query_one(conn, SQL_CLIENT_HOST))
    finally:
        conn.close()


def check_clients(spec: ConnectionSpec, clients: int) -> None:
    """Refuse client counts the server cannot accept (max_connections), before starting anything."""
    conn = admin_connection(spec)
    try:
        limit = int(query_one(conn, SQL_MAX_CONNECTIONS))
    finally:
        conn.close()
    if clients + 2 > limit:
        raise UsageError(f"--clients {clients} needs {clients + 2} connections but the server's max_connections is "
                         f"{limit}; raise max_connections or use fewer clients")


def prepare_database(spec: ConnectionSpec, database: str, drop: bool, tool: str, create: bool = True) -> None:
    """Refuse a database that already holds tables unless ``drop``; then create it (unless the tool does)."""
    conn = admin_connection(spec)
    try:
        tables = int(query_one(conn, SQL_COUNT_TABLES, (database,)) or 0)
        if tables and not drop:
            raise WorkloadError(f"database {database} already has {tables} tables; give another database for the "
                                f"{tool} schema, or drop it (drop=True / --drop) to reload it")
        if tables:
            execute(conn, f"DROP DATABASE `{database}`")
        if create:
            execute(conn, SQL_CREATE_DATABASE.format(db=database))
    finally:
        conn.close()


def count_warehouses(spec: ConnectionSpec, database: str, table: str, tool: str) -> int:
    conn = admin_connection(spec)
    try:
        try:
            return int(query_one(conn, SQL_COUNT_WAREHOUSES.format(db=database, table=table)) or 0)
        except Exception as exc:  # mysql.connector.Error: unknown database or table
            raise WorkloadError(f"database {database} has no {tool} schema ({getattr(exc, 'msg', exc)}); "
                                f"load it first with the {tool} adapter's load") from None
    finally:
        conn.close()


@dataclass
class BenchAccount:
    user: str
    password: str = field(repr=False)
    host: str  # the account's host part (client address)
    endpoint: Endpoint


@contextlib.contextmanager
def bench_account(spec: ConnectionSpec, database: str) -> Iterator[BenchAccount]:
    """A temporary account for a peer that takes its password in argv; dropped afterwards.

    Scope: ALL PRIVILEGES on the peer's database only, from the one client
    address the peer connects from, for the duration of the ``with`` block.
    """
    check_database_name(database)
    conn = admin_connection(spec)
    try:
        where = endpoint(spec, conn)
        host = client_host(spec, where)
        account = BenchAccount(user=f"innotier_peer_{secrets.token_hex(4)}",
                               password=secrets.token_urlsafe(18), host=host, endpoint=where)
        execute(conn, SQL_CREATE_ACCOUNT, (account.user, host, account.password))
        try:
            execute(conn, SQL_GRANT_DATABASE.format(db=database), (account.user, host))
            yield account
        finally:
            _drop_account(spec, conn, account, failing=sys.exc_info()[0] is not None)
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def _drop_account(spec: ConnectionSpec, conn, account: BenchAccount, failing: bool) -> None:
    try:
        with contextlib.suppress(Exception):
            conn.ping(reconnect=True)
        execute(conn, SQL_DROP_ACCOUNT, (account.user, account.host))
    except Exception as exc:
        if failing:  # the run's own error is the one to report; a leftover account is named innotier_peer_*
            return
        raise ServerError(f"could not drop the temporary account '{account.user}'@'{account.host}' on "
                          f"{spec.describe()} ({getattr(exc, 'msg', exc)}); drop it by hand with DROP USER") from None


# ---------------------------------------------------------------------------
# Server-side counters (HammerDB's definitions, applied to every peer)


@dataclass
class CounterSample:
    at: float  # time.monotonic()
    next_order_ids: int  # sum(d_next_o_id)
    transactions: int  # Com_commit + Com_rollback


def sample_counters(conn, database: str, district_table: str) -> CounterSample:
    cur = conn.cursor()
    try:
        cur.execute(SQL_TRANSACTION_COUNTERS)
        status = {(k.decode() if isinstance(k, bytes) else k).lower(): int(v) for k, v in cur.fetchall()}
        cur.execute(SQL_SUM_NEXT_ORDER_ID.format(db=database, table=district_table))
        row = cur.fetchone()
    finally:
        cur.close()
    return CounterSample(at=time.monotonic(), next_order_ids=int(row[0] or 0),
                         transactions=status.get("com_commit", 0) + status.get("com_rollback", 0))


def rates(start: CounterSample, end: CounterSample) -> dict[str, float]:
    """NOPM and TPM as HammerDB defines them, over the wall-clock window between two samples."""
    minutes = max(end.at - start.at, 1e-6) / 60.0
    return {"nopm": round((end.next_order_ids - start.next_order_ids) / minutes, 1),
            "tpm": round((end.transactions - start.transactions) / minutes, 1),
            "window_seconds": round(end.at - start.at, 6)}


class CounterWindow:
    """Samples the server counters at the start and end of a peer's measured phase.

    ``start()`` / ``stop()`` may be called from the output reader when the tool
    announces its phases (tpcc-mysql's "MEASURING START."), or around the
    process for peers whose warm-up is a separate run.
    """

    def __init__(self, spec: ConnectionSpec, database: str, district_table: str) -> None:
        self.database, self.table = database, district_table
        self.conn = admin_connection(spec)
        self.first: CounterSample | None = None
        self.last: CounterSample | None = None

    def start(self) -> None:
        if self.first is None:
            self.first = sample_counters(self.conn, self.database, self.table)

    def stop(self) -> None:
        if self.first is not None and self.last is None:
            self.last = sample_counters(self.conn, self.database, self.table)

    def result(self) -> dict[str, float] | None:
        if self.first is None or self.last is None:
            return None
        return rates(self.first, self.last)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


# ---------------------------------------------------------------------------
# Running a tool


def redact(text: str, secrets_: tuple[str, ...]) -> str:
    for s in secrets_:
        if s:
            text = text.replace(s, "********")
    return text


@dataclass
class ToolOutput:
    argv: list[str]  # redacted
    returncode: int
    text: str  # stdout and stderr merged, redacted
    seconds: float
    timed_out: bool = False


def run_tool(argv: list[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
             timeout: float, secrets_: tuple[str, ...] = (), on_line: LineSink | None = None,
             watch: Callable[[str], None] | None = None) -> ToolOutput:
    """Run a peer tool, stdout and stderr merged, lines redacted and passed to ``on_line`` as they come.

    ``watch`` sees each (raw, redacted) line too: adapters use it to sample
    server counters when the tool announces a phase.  Past ``timeout`` the
    tool's process group is killed and the output so far is returned.
    """
    full_env = dict(os.environ)
    full_env.update(env or {})
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        raise ToolMissing(f"cannot start {argv[0]}: {exc.strerror}; check the tool's path and permissions") from None
    timed_out = threading.Event()

    def kill_on_timeout() -> None:
        timed_out.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, kill_on_timeout)
    timer.daemon = True
    timer.start()
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = redact(raw.decode(errors="replace"), secrets_)
            lines.append(line)
            if watch:
                watch(line)
            if on_line:
                on_line(line.rstrip("\n").lstrip("\r"))
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return ToolOutput(argv=[redact(a, secrets_) for a in argv], returncode=proc.returncode, text="".join(lines),
                      seconds=time.monotonic() - t0, timed_out=timed_out.is_set())


def tail(text: str, n: int = 5) -> str:
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) or "no output"


def check_ran(out: ToolOutput, label: str, ok: bool = True) -> None:
    """Raise WorkloadError when the tool timed out, failed, or did not print its success marker."""
    if out.timed_out:
        raise WorkloadError(f"{label} did not finish within its time limit and was killed after "
                            f"{out.seconds:.0f} s; last output: {tail(out.text)}")
    if out.returncode != 0 or not ok:
        raise WorkloadError(f"{label} failed (exit code {out.returncode}): {tail(out.text)}; "
                            "fix the cause shown and run again")


def verify_loaded(spec: ConnectionSpec, database: str, table: str, tool: str, label: str, warehouses: int) -> None:
    """After a peer's loader: the schema holds exactly the warehouses asked for."""
    loaded = count_warehouses(spec, database, table, tool)
    if loaded != warehouses:
        raise WorkloadError(f"{label} loaded {loaded} warehouses into {database}, not {warehouses}; "
                            "see its output and load again with drop")


CONDITIONS_CHECK_BY = "innotier's TPC-C conditions, the peer's known deviations named"


def conditions_check(spec: ConnectionSpec, database: str, known: dict[str, str]) -> tuple[bool, str]:
    """innotier's TPC-C consistency conditions on a peer's schema: (all passed, detail), the detail naming the
    peer's ``known`` deviations (condition -> why its own transactions break it) among the failures."""
    return tpcc_check.run_checks(spec.with_database(database), database).verdict(known)


def whole_seconds(cfg) -> tuple[int, int, int]:
    """Warm-up, duration and interval as the whole seconds the command-line peers take."""
    return max(0, round(cfg.warmup)), max(1, round(cfg.duration)), max(1, round(cfg.interval))


def prepare_run(spec: ConnectionSpec, cfg, table: str, tool: str, label: str, find,
                keying_supported: bool = True) -> tuple[str, int]:
    """The checks every peer run makes first, in this order: a valid config and database name, the tool
    found, a loaded schema with the warehouses asked for, clients within max_connections.  Returns (tool, warehouses)."""
    if cfg.keying_and_think and not keying_supported:
        raise UsageError(f"{label} has no keying and think times; run it without --keying-and-think")
    cfg.validate()
    check_database_name(cfg.database)
    path = find(cfg.tool_path)
    loaded = count_warehouses(spec, cfg.database, table, tool)
    if cfg.warehouses is not None and cfg.warehouses != loaded:
        raise UsageError(f"the {label} schema in {cfg.database} has {loaded} warehouses, not {cfg.warehouses}; "
                         f"run with --warehouses {loaded} or load it again")
    check_clients(spec, cfg.clients)
    return path, loaded


def attach_server_counters(result, server: dict[str, float] | None, source: str) -> None:
    """Put a CounterWindow's NOPM and TPM (HammerDB's definitions) on a peer's result, saying where they came from."""
    if server:
        result.nopm, result.tpm = server["nopm"], server["tpm"]
        result.extra["server_window_seconds"] = server["window_seconds"]
        result.extra["nopm_tpm_source"] = f"server counters sampled {source} (HammerDB's definitions)"


def command_line(out: ToolOutput) -> str:
    """The peer's exact command line as run, credentials already masked (``run_tool`` redacts argv)."""
    return " ".join(shlex.quote(a) for a in out.argv)


def record_commands(result, runs: list[tuple[str, ToolOutput | None]], settings: dict,
                    scripts: dict[str, str] | None = None) -> None:
    """Put on a peer's result what was run, exactly (masked), and with which settings.

    ``runs``: (phase, output) pairs in order (warm-up, measured); ``scripts``:
    input files the peer read (HammerDB's Tcl), masked by the caller.
    """
    result.extra["commands"] = [{"phase": phase, "command": command_line(out), "exit_code": out.returncode,
                                 "seconds": round(out.seconds, 1)} for phase, out in runs if out is not None]
    if scripts:
        result.extra["scripts"] = scripts
    result.extra["settings"] = settings
    result.extra["realized_mix"] = realized_mix(result)


def realized_mix(result) -> dict[str, float] | None:
    """Each type's share of the transactions the peer ran: from its counts, else its latency counts (HammerDB)."""
    counts = result.counts or {op: {"commit": int(lat.get("count", 0))} for op, lat in result.latency_ms.items()}
    if not any(sum(c.values()) for c in counts.values()):
        return None
    return mix.realized_mix(counts)


def run_settings(cfg, warehouses: int, where: Endpoint | None = None, **tool_specific) -> dict:
    """The settings a peer ran with, in one shape for every adapter."""
    out = {"clients": cfg.clients, "warehouses": warehouses, "warmup_seconds": cfg.warmup,
           "duration_seconds": cfg.duration, "interval_seconds": cfg.interval,
           "keying_and_think": cfg.keying_and_think, "database": cfg.database}
    if where is not None:
        out["endpoint"] = f"{where.host}:{where.port} (TCP)"
    out.update(tool_specific)
    return out


@dataclass
class Measured:
    """What a peer's run did: its runs in order as (phase, output) (the measured one last) and the outputs."""

    runs: list[tuple[str, ToolOutput | None]]
    measured: ToolOutput


@dataclass
class PeerRun:
    """How one peer tool is run: the parts of its ``run()`` that differ from the other peers'."""

    tool: str  # the adapter's name
    label: str  # for errors: "go-tpc run"
    path: str  # the tool as found
    mode: str  # the one --mode the tool has
    runs_as: str  # how its transactions reach the server, for the note when --mode asks for another
    district_table: str
    counters_note: str  # where the server counters were sampled, for the result
    parse: Callable[[str], object]  # the tool's console output -> RunResult
    # (account, counter window) -> what ran; it starts and stops the window around the measured phase
    execute: Callable[[BenchAccount, "CounterWindow"], Measured]


def run_measured(spec: ConnectionSpec, cfg, peer: PeerRun, settings: dict) -> tuple[object, Measured]:
    """The skeleton every peer's ``run()`` shares: a bench account, the server's counters sampled around the
    measured phase, the output parsed (a tool that failed without a timeline is an error naming it), and the
    commands, settings and tool recorded on the result.  Returns the result and what ran."""
    window = CounterWindow(spec, cfg.database, peer.district_table)
    try:
        with bench_account(spec, cfg.database) as account:
            done = peer.execute(account, window)
        server = window.result()
    finally:
        window.close()
    out = done.measured
    result = peer.parse(out.text)
    if out.timed_out or (out.returncode != 0 and not result.timeline):
        check_ran(out, peer.label)
    attach_server_counters(result, server, peer.counters_note)
    record_commands(result, done.runs, settings)
    result.extra["tool"] = peer.path
    if cfg.mode != peer.mode:
        result.extra["note"] = f"{peer.tool} runs {peer.runs_as}; --mode {cfg.mode} does not apply"
    return result, done
