"""Measure where the I/O goes: performance_schema snapshots before, during and after a window.

Per file: ``file_summary_by_instance`` (reads, writes, misc = fsync/open/close, bytes, wait time; the
timers are picoseconds).  Per table: ``table_io_waits_summary_by_table`` (rows fetched, inserted,
updated, deleted).  A snapshot every ``interval`` seconds; the deltas between them are the profile's
intervals, which the advisor resamples for its uncertainty.

MariaDB (10.11, 11.8) does not instrument its redo log in performance_schema (there is no
``wait/io/file/innodb/innodb_log_file``), so its redo is *counted* from SHOW GLOBAL STATUS
(``Innodb_log_writes``, ``Innodb_os_log_written``; one fsync per write with
``innodb_flush_log_at_trx_commit=1``): a named weaker source with counts and no wait times.
MySQL 9.7 instruments it and has performance_schema on by default; MariaDB has it off by default
(sandboxes turn it on), and it can only be turned on at a restart.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from typing import Any, Callable

from tuner.core.errors import ServerError
from tuner.core.server import ConnectionSpec, ServerModel, fetch_status, fetch_variables, model_from_variables
from tuner.placement import objects, spaces
from tuner.placement.model import FileIo, Interval, IoProfile, Snapshot, TableRows
from tuner.tpcc import driver

PS = 1e-12  # performance_schema timers count picoseconds

SQL_PS_ON = "SELECT @@GLOBAL.performance_schema"
SQL_INSTRUMENTS = ("SELECT COUNT(*), COALESCE(SUM(ENABLED = 'YES' AND TIMED = 'YES'), 0) "
                   "FROM performance_schema.setup_instruments WHERE NAME LIKE 'wait/io/file/innodb/%'")
SQL_CONSUMER = "SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'global_instrumentation'"
SQL_FILES = ("SELECT FILE_NAME, COUNT_READ, SUM_NUMBER_OF_BYTES_READ, SUM_TIMER_READ, COUNT_WRITE, "
             "SUM_NUMBER_OF_BYTES_WRITE, SUM_TIMER_WRITE, COUNT_MISC, SUM_TIMER_MISC "
             "FROM performance_schema.file_summary_by_instance WHERE COUNT_STAR > 0")
SQL_TABLES = ("SELECT OBJECT_SCHEMA, OBJECT_NAME, COUNT_FETCH, COUNT_INSERT, COUNT_UPDATE, COUNT_DELETE, "
              "SUM_TIMER_WAIT FROM performance_schema.table_io_waits_summary_by_table "
              "WHERE OBJECT_TYPE = 'TABLE' AND OBJECT_SCHEMA NOT IN "
              "('mysql', 'sys', 'performance_schema', 'information_schema')")
SQL_TABLE_SIZES = ("SELECT TABLE_SCHEMA, TABLE_NAME, DATA_LENGTH + INDEX_LENGTH + DATA_FREE "
                   "FROM information_schema.TABLES WHERE ENGINE = 'InnoDB'")
ENABLE_FILE_INSTRUMENTS = ("UPDATE performance_schema.setup_instruments SET ENABLED = 'YES', TIMED = 'YES' "
                           "WHERE NAME LIKE 'wait/io/file/%'")


def check_source(conn, where: str, sandbox: str | None = None) -> None:
    """Refuse, in one line naming the fix, a server whose performance_schema cannot say where I/O goes."""
    cur = conn.cursor()
    cur.execute(SQL_PS_ON)
    (on,) = cur.fetchone()
    if str(on).upper() not in ("1", "ON"):
        how = (f"put performance_schema=ON under [mysqld] in a .cnf file in the sandbox's conf.d and restart it "
               f"(`innotier sandbox stop {sandbox}`, then `start`)" if sandbox else
               "add performance_schema=ON under [mysqld] in the server's option file and restart the server")
        raise ServerError(f"performance_schema is OFF on {where}, so per-file I/O cannot be measured, and it cannot "
                          f"be turned on while the server runs: {how}")
    cur.execute(SQL_INSTRUMENTS)
    total, timed = cur.fetchone()
    cur.execute(SQL_CONSUMER)
    row = cur.fetchone()
    cur.close()
    if not int(timed or 0) or (row and str(row[0]).upper() != "YES"):
        raise ServerError(f"{where} has performance_schema on but its InnoDB file instruments ({total}) are not "
                          f"enabled and timed; run \"{ENABLE_FILE_INSTRUMENTS}\" and UPDATE setup_consumers "
                          "SET ENABLED='YES' WHERE NAME='global_instrumentation', then measure again")


def _s(v) -> str:
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def read_files(cur) -> dict[str, FileIo]:
    cur.execute(SQL_FILES)
    out: dict[str, FileIo] = {}
    for name, nr, br, tr, nw, bw, tw, nm, tm in cur.fetchall():
        io = FileIo(int(nr), int(br), int(tr) * PS, int(nw), int(bw), int(tw) * PS, int(nm), int(tm) * PS)
        key = os.path.normpath(_s(name))
        out[key] = out[key] + io if key in out else io  # several instruments may name one file
    return out


def read_tables(cur) -> dict[str, TableRows]:
    cur.execute(SQL_TABLES)
    return {f"{_s(s)}.{_s(t)}": TableRows(int(f), int(i), int(u), int(d), int(w) * PS)
            for s, t, f, i, u, d, w in cur.fetchall()}


class Sampler:
    """Takes snapshots on one connection; knows whether redo must be counted from status instead."""

    def __init__(self, conn, model: ServerModel, clock: Callable[[], float] = time.monotonic,
                 owners: objects.Owners | None = None) -> None:
        self.conn, self.model, self.clock = conn, model, clock
        self.owners = owners or {}   # MySQL general tablespaces: file -> its tables (spaces.py)
        self.snapshots: list[Snapshot] = []
        self.redo_counted: str | None = None   # the redo file counted from status, when P_S does not see it

    def take(self) -> Snapshot:
        cur = self.conn.cursor()
        files, tables = read_files(cur), read_tables(cur)
        cur.close()
        if not self.snapshots and not any(_kind(p, self.model) == "redo" for p in files):
            redo = objects.component_files("redo", self.model)
            self.redo_counted = redo[0] if redo else None
        if self.redo_counted:
            files[self.redo_counted] = self._redo_from_status()
        snap = Snapshot(self.clock(), files, tables)
        self.snapshots.append(snap)
        return snap

    def _redo_from_status(self) -> FileIo:
        status = fetch_status(self.conn)
        writes = int(status.get("Innodb_log_writes") or 0)
        per_commit = self.model.variables.get("innodb_flush_log_at_trx_commit", "1") == "1"
        return FileIo(writes=writes, write_bytes=int(status.get("Innodb_os_log_written") or 0),
                      misc=writes if per_commit else 0, timed=False)


def _kind(path: str, model: ServerModel) -> str | None:
    found = objects.classify(path, model)
    return None if found is None else found[1]


def observe(sampler: Sampler, seconds: float, interval: float,
            sleep: Callable[[float], None] = time.sleep) -> None:
    """Snapshots every ``interval`` seconds for ``seconds`` (the user's own traffic on a live server)."""
    start = sampler.take().at
    k = 1
    while k * interval < seconds + 1e-9:
        sleep(max(0.0, start + k * interval - sampler.clock()))
        sampler.take()
        k += 1


def during_tpcc(sampler: Sampler, spec: ConnectionSpec, cfg) -> Any:
    """Run the built-in TPC-C and snapshot at the start of its measured phase and at each report interval."""
    if cfg.warmup <= 0:
        sampler.take()

    def on_tick(what: str, offset: float, m) -> None:
        if what in ("start", "interval", "end"):
            sampler.take()

    return driver.run(spec, cfg, on_tick=on_tick)


def intervals(snapshots: list[Snapshot]) -> tuple[Interval, ...]:
    out = []
    for before, after in zip(snapshots, snapshots[1:]):
        files = {name: io.since(before.files.get(name)) for name, io in after.files.items()}
        out.append(Interval(after.at - before.at, {k: v for k, v in files.items() if v.ops}))
    return tuple(out)


def table_sizes(conn) -> dict[str, int]:
    cur = conn.cursor()
    cur.execute(SQL_TABLE_SIZES)
    out = {f"{_s(s)}.{_s(t)}": int(n or 0) for s, t, n in cur.fetchall()}
    cur.close()
    return out


def build_profile(sampler: Sampler, table_bytes: dict[str, int], workload: dict[str, Any],
                  started: datetime) -> IoProfile:
    snaps = sampler.snapshots
    if len(snaps) < 2:
        raise ServerError("the measured window closed before a second snapshot; measure for longer "
                          "(--seconds at least --interval)")
    ivals = intervals(snaps)
    totals: dict[str, FileIo] = {}
    tmp_peak = 0
    for iv in ivals:
        tmp = 0
        for name, io in iv.files.items():
            totals[name] = totals[name] + io if name in totals else io
            if _kind(name, sampler.model) == "tmpdir":
                tmp += io.write_bytes
        tmp_peak = max(tmp_peak, tmp)
    # every file the server has open is a candidate's, even one the window did not touch (it gains nothing)
    seen = set(totals) | set(snaps[-1].files)
    cands, other = objects.candidates(seen, sampler.model, {"tmpdir": tmp_peak}, table_bytes, sampler.owners)
    tables = {k: v.since(snaps[0].tables.get(k)) for k, v in snaps[-1].tables.items()}
    notes = []
    if sampler.redo_counted:
        notes.append(f"redo ({sampler.redo_counted}) is not in performance_schema on this server: counted from "
                     "SHOW GLOBAL STATUS (Innodb_log_writes, Innodb_os_log_written), priced on the tier it is on")
    m = sampler.model
    server = {"flavor": m.flavor.value, "version": str(m.version), "sandbox": m.sandbox, "datadir": m.datadir,
              "page_size": m.page_size, "innodb_flush_log_at_trx_commit":
                  m.variables.get("innodb_flush_log_at_trx_commit"),
              "innodb_buffer_pool_size": m.variables.get("innodb_buffer_pool_size")}  # what `placement check` runs
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    return IoProfile(profile_id=f"io-{stamp}-{m.sandbox or 'server'}", taken_at=started.isoformat(timespec="seconds"),
                     server=server, workload=workload, intervals=ivals, candidates=tuple(cands),
                     other_files=tuple(other), tables={k: v for k, v in tables.items() if v.fetch or v.insert
                                                       or v.update or v.delete}, notes=tuple(notes))


def open_sampler(spec: ConnectionSpec) -> Sampler:
    """Connect, check the source (nothing is changed on a server that lacks it), describe the server."""
    conn = spec.with_database(None).connect()
    try:
        check_source(conn, spec.describe(), spec.sandbox)
        model = model_from_variables(fetch_variables(conn), sandbox=spec.sandbox)
        owners = spaces.general_tablespaces(conn, model)
    except Exception:
        conn.close()
        raise
    return Sampler(conn, model, owners=owners)


def measure(spec: ConnectionSpec, *, seconds: float | None = None, interval: float = 5.0,
            tpcc: Any = None, sleep: Callable[[float], None] = time.sleep) -> IoProfile:
    """One window: the user's own traffic for ``seconds``, or a built-in TPC-C run (``tpcc``: a RunConfig)."""
    sampler = open_sampler(spec)
    started = datetime.now(timezone.utc)
    try:
        if tpcc is not None:
            result = during_tpcc(sampler, spec, tpcc)
            workload = {"kind": "tpcc", "settings": tpcc.to_dict(),
                        "result": {k: result.to_dict().get(k) for k in ("tpmc", "nopm", "tpm", "complete",
                                                                        "measured_seconds", "errors", "counts",
                                                                        "warehouses")}}
        else:
            observe(sampler, float(seconds or 0), interval, sleep)
            workload = {"kind": "observed", "seconds": seconds, "interval": interval}
        return build_profile(sampler, table_sizes(sampler.conn), workload, started)
    finally:
        sampler.conn.close()
