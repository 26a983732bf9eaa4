"""InnoDB's own wait evidence over a cell's measured window: what the server waited on, beside its throughput.

A cell whose throughput falls while its CPU and I/O stay low waited on something else (issue 33: the 4 KB
page-size cells at 2,880 tpmC used 18-28% CPU).  ``EvidenceWindow`` reads the server at both ends of the
measured window and stores the differences:

- SHOW GLOBAL STATUS counters (``COUNTERS``): free-page waits (a thread found no free page and waited for
  the page cleaner), pages flushed from the LRU tail and from the flush list, log waits (the log buffer
  was full), row-lock waits and their time, data fsyncs;
- gauges at the end (``GAUGES``): pending fsyncs, free pages, MariaDB's checkpoint age;
- SHOW ENGINE INNODB STATUS (tuner.core.innodb_status) at both ends: OS-wait and spin-round deltas (MySQL;
  MariaDB 10.6+ prints no semaphore counts), row-lock and semaphore waits at each instant, pending fsyncs
  and I/O, checkpoint age from the LSN lines;
- gauges sampled every 2 s on a second connection (``peaks``): the fewest free pages, the largest checkpoint
  age (MySQL's from its redo LSNs), the most row-lock waiters and pending fsyncs and reads at once, and the
  oldest open transaction (``INNODB_TRX``: its age, state, operation, rows locked, and the statement's first
  words): one transaction stuck for seconds holds its row locks while every client that needs one queues;
- the error log written during the window: the page cleaner's "intended loop took" / "Page cleaner took"
  warnings (MariaDB 10.5+ prints none).

What the servers report differs, and the report says so rather than showing a 0 as "no waits": MariaDB
10.11 and 11.8 reported 0 free-page waits over a 4 KB, 8M-buffer-pool run in which every page write was an
LRU flush (recorded in tests/fixtures/recorded/innodb-status/); what they do report is the eviction work
itself, ``Innodb_buffer_pool_pages_LRU_flushed`` (dirty pages written to free a page) and ``..._LRU_freed``.
MySQL 9.7 counted 935 free-page waits in the same regime and splits no LRU flushing out in SHOW STATUS.

The CPU and I/O pressure of the window are the noise window's (tuner/sweep/noise.py): ``evidence_columns``
puts both side by side.  Reading the evidence never fails a cell: a failed read is stored as its reason.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

from tuner.core import innodb_status
from tuner.core.server import fetch_status

# evidence name -> SHOW GLOBAL STATUS variable (compared without case: MariaDB prints ..._lru_flushed)
COUNTERS = {
    "free_page_waits": "Innodb_buffer_pool_wait_free",
    "lru_flushed": "Innodb_buffer_pool_pages_LRU_flushed",  # MariaDB
    "lru_freed": "Innodb_buffer_pool_pages_LRU_freed",  # MariaDB 10.6+: clean pages evicted from the LRU tail
    "pages_flushed": "Innodb_buffer_pool_pages_flushed",
    "log_waits": "Innodb_log_waits",
    "row_lock_waits": "Innodb_row_lock_waits",
    "row_lock_time_ms": "Innodb_row_lock_time",
    "data_fsyncs": "Innodb_data_fsyncs",
}
GAUGES = {
    "pending_fsyncs": "Innodb_data_pending_fsyncs",
    "log_pending_fsyncs": "Innodb_os_log_pending_fsyncs",  # MySQL
    "free_pages": "Innodb_buffer_pool_pages_free",
    "checkpoint_age": "Innodb_checkpoint_age",  # MariaDB
}
# gauges sampled every SAMPLE_EVERY seconds through the window: a stall is a moment the window's two ends can miss
SAMPLED = {
    "free_pages": "Innodb_buffer_pool_pages_free",
    "row_lock_current_waits": "Innodb_row_lock_current_waits",
    "pending_fsyncs": "Innodb_data_pending_fsyncs",
    "pending_reads": "Innodb_data_pending_reads",
    "checkpoint_age": "Innodb_checkpoint_age",  # MariaDB
    "redo_lsn": "Innodb_redo_log_current_lsn",  # MySQL 8.0.30+: the checkpoint age is their difference
    "redo_checkpoint_lsn": "Innodb_redo_log_checkpoint_lsn",
}
SAMPLE_EVERY = 2.0
# the oldest open transaction at each sample: one transaction stuck for seconds holds its row locks, and every
# client that needs one of them queues behind it (a lock convoy: throughput falls, CPU and I/O with it)
SQL_OLDEST_TRX = ("SELECT TIMESTAMPDIFF(SECOND, trx_started, NOW()) AS age_s, trx_state, trx_operation_state, "
                  "trx_rows_locked, trx_rows_modified, trx_lock_structs, trx_query "
                  "FROM information_schema.INNODB_TRX ORDER BY trx_started LIMIT 1")
SQL_SAMPLE = ("SHOW GLOBAL STATUS WHERE Variable_name IN ("
              + ", ".join(f"'{v}'" for v in SAMPLED.values()) + ")")
# cumulative counters of the monitor output (differences over the window)
MONITOR_COUNTERS = ("os_wait_reservations", "os_wait_signals", "rw_spins", "rw_spin_rounds", "rw_os_waits")
# what the monitor output says at an instant (kept at both ends)
MONITOR_NOW = ("semaphore_waits_now", "lock_waits_now", "pending_fsyncs", "pending_log_fsyncs", "pending_reads",
               "pending_writes", "checkpoint_age", "free_pages", "modified_pages", "pending_lru_writes",
               "pending_flush_list_writes")


def _status_numbers(status: dict[str, str], names: dict[str, str]) -> dict[str, int | None]:
    lower = {k.lower(): v for k, v in status.items()}
    out: dict[str, int | None] = {}
    for key, var in names.items():
        raw = lower.get(var.lower())
        try:
            out[key] = int(raw) if raw is not None else None
        except ValueError:
            out[key] = None
    return out


def _delta(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else b - a


Reading = dict[str, Any]  # t, counters, gauges, monitor, log_offset: the server at one instant


def read(conn, error_log: Path | None) -> Reading:
    """Status counters and gauges, the monitor's figures and the error log's size, now."""
    status = fetch_status(conn)
    monitor = innodb_status.parse(innodb_status.fetch(conn)).to_dict()
    return {"t": time.monotonic(), "counters": _status_numbers(status, COUNTERS),
            "gauges": _status_numbers(status, GAUGES), "monitor": monitor, "log_offset": _size(error_log)}


def _size(path: Path | None) -> int | None:
    try:
        return os.path.getsize(path) if path else None
    except OSError:
        return None


def _log_since(path: Path | None, offset: int | None) -> str:
    if path is None or offset is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(4 << 20).decode(errors="replace")  # a window's warnings, not a runaway log
    except OSError:
        return ""


def window_evidence(begin: Reading, end: Reading, log_text: str) -> dict[str, Any]:
    """The differences between two readings and the page-cleaner warnings logged between them."""
    seconds = max(end["t"] - begin["t"], 1e-9)
    counters = {k: _delta(begin["counters"].get(k), end["counters"].get(k)) for k in COUNTERS}
    if counters["pages_flushed"] is not None and counters["lru_flushed"] is not None:
        counters["flush_list_flushed"] = counters["pages_flushed"] - counters["lru_flushed"]
    mb, me = begin["monitor"], end["monitor"]
    warnings = innodb_status.page_cleaner_warnings(log_text)
    return {
        "seconds": round(seconds, 2),
        "counters": counters,
        "per_second": {k: round(v / seconds, 3) for k, v in counters.items() if v is not None},
        "gauges_end": end["gauges"],
        "monitor": {**{k: _delta(mb.get(k), me.get(k)) for k in MONITOR_COUNTERS},
                    "begin": {k: mb.get(k) for k in MONITOR_NOW}, "end": {k: me.get(k) for k in MONITOR_NOW}},
        "page_cleaner": {"warnings": len(warnings), "max_took_ms": max((w.took_ms for w in warnings), default=None)},
    }


def sample_of(status: dict[str, str]) -> dict[str, int | None]:
    """One sample of the sampled gauges; MySQL's checkpoint age from its two redo LSNs."""
    out = _status_numbers(status, SAMPLED)
    if out["checkpoint_age"] is None and out["redo_lsn"] is not None and out["redo_checkpoint_lsn"] is not None:
        out["checkpoint_age"] = out["redo_lsn"] - out["redo_checkpoint_lsn"]
    return {k: v for k, v in out.items() if not k.startswith("redo_")}


def peaks(samples: list[dict[str, int | None]]) -> dict[str, Any]:
    """The extremes of the samples: the fewest free pages, the oldest checkpoint, the most waiters."""
    def pick(key: str, fn) -> int | None:
        seen = [x[key] for x in samples if x.get(key) is not None]
        return fn(seen) if seen else None

    return {"samples": len(samples), "free_pages_min": pick("free_pages", min),
            "checkpoint_age_max": pick("checkpoint_age", max),
            "row_lock_current_waits_max": pick("row_lock_current_waits", max),
            "pending_fsyncs_max": pick("pending_fsyncs", max), "pending_reads_max": pick("pending_reads", max)}


STATEMENT_TARGETS = (  # what a statement is named by: its verb and the table (or procedure) it works on
    re.compile(r"\s*(INSERT|REPLACE)\s+(?:IGNORE\s+)?INTO\s+([\w.`]+)", re.I),
    re.compile(r"\s*(UPDATE|CALL)\s+([\w.`]+)", re.I),
    re.compile(r"\s*(DELETE)\s+FROM\s+([\w.`]+)", re.I),
    re.compile(r"\s*(SELECT)\b.*?\bFROM\s+([\w.`]+)", re.I | re.S),
)


def statement_kind(query: str | None) -> str | None:
    """A statement named by its verb and table ('INSERT INTO order_line', 'CALL tpcc_new_order'), never by its
    literals: a statement's text may hold a password."""
    if not query:
        return None
    if any(w in query.upper() for w in ("PASSWORD", "IDENTIFIED")):
        return None
    for pattern in STATEMENT_TARGETS:
        m = pattern.match(query)
        if m:
            verb = m.group(1).upper()
            joiner = " INTO " if verb in ("INSERT", "REPLACE") else " FROM " if verb in ("DELETE", "SELECT") else " "
            return f"{verb}{joiner}{m.group(2)}"[:60]
    return query.split()[0].upper()[:20]


def oldest_of(row: tuple | None) -> dict[str, Any] | None:
    """The oldest transaction's row of ``SQL_OLDEST_TRX`` as stored evidence (None: no transaction open)."""
    if not row or row[0] is None:
        return None
    age, state, op, locked, modified, structs, query = (x.decode() if isinstance(x, bytes) else x for x in row)
    return {"age_s": int(age), "state": state, "operation": op or None, "rows_locked": locked,
            "rows_modified": modified, "lock_structs": structs, "statement": statement_kind(query)}


class _Sampler(threading.Thread):
    """Samples the gauges on its own connection until stopped; a failure ends the sampling, not the cell."""

    def __init__(self, connect: Callable[[], Any], every: float) -> None:
        super().__init__(name="innotier-evidence-sampler", daemon=True)
        self._connect = connect
        self._every = every
        self._halt = threading.Event()
        self.samples: list[dict[str, int | None]] = []
        self.failure: str | None = None
        self.oldest: dict[str, Any] | None = None  # the oldest transaction seen at any sample
        self.oldest_failure: str | None = None  # its query failed (no PROCESS privilege): the gauges go on

    def run(self) -> None:
        try:
            conn = self._connect()
        except Exception as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            return
        try:
            while not self._halt.wait(self._every):
                cur = conn.cursor()
                cur.execute(SQL_SAMPLE)
                rows = cur.fetchall()
                cur.close()
                self.samples.append(sample_of({(k.decode() if isinstance(k, bytes) else k):
                                               (v.decode() if isinstance(v, bytes) else v) for k, v in rows}))
                self._sample_oldest(conn)
        except Exception as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()

    def _sample_oldest(self, conn) -> None:
        if self.oldest_failure:
            return
        try:
            cur = conn.cursor()
            cur.execute(SQL_OLDEST_TRX)
            rows = cur.fetchall()
            now = oldest_of(rows[0] if rows else None)
            cur.close()
        except Exception as exc:
            self.oldest_failure = f"{type(exc).__name__}: {exc}"
            return
        if now and (self.oldest is None or now["age_s"] > self.oldest["age_s"]):
            self.oldest = now

    def stop(self) -> dict[str, Any]:
        self._halt.set()
        self.join(timeout=30)
        return {**peaks(self.samples), "every_s": self._every, "failure": self.failure,
                "oldest_trx": self.oldest, "oldest_trx_failure": self.oldest_failure}


class EvidenceWindow:
    """Readings around a measured window.  ``connect()`` opens a connection to the cell's server."""

    def __init__(self, connect: Callable[[], Any], error_log: Path | None, every: float = SAMPLE_EVERY) -> None:
        self._connect = connect
        self._error_log = error_log
        self._every = every
        self._begin: Reading | None = None
        self._sampler: _Sampler | None = None
        self.failure: str | None = None

    def _read(self) -> Reading:
        conn = self._connect()
        try:
            return read(conn, self._error_log)
        finally:
            conn.close()

    def begin(self) -> None:
        try:
            self._begin = self._read()
        except Exception as exc:  # evidence is a witness, never a reason to fail the cell
            self.failure = f"reading the server at the window's start failed: {type(exc).__name__}: {exc}"
            return
        self._sampler = _Sampler(self._connect, self._every)
        self._sampler.start()

    def end(self) -> dict[str, Any]:
        sampled = self._sampler.stop() if self._sampler is not None else None
        if self._begin is None:
            return {"error": self.failure or "the measured window never started"}
        try:
            end = self._read()
        except Exception as exc:
            return {"error": f"reading the server at the window's end failed: {type(exc).__name__}: {exc}"}
        return {**window_evidence(self._begin, end, _log_since(self._error_log, self._begin["log_offset"])),
                "peaks": sampled}


# ---------------------------------------------------------------------------
# Flat figures (report, outliers, export)

# column -> (label for people, what it means)
SIGNALS = {
    "free_page_waits": ("free-page waits", "a thread found no free page and waited for the page cleaner"),
    "lru_flushed": ("LRU-flushed pages", "dirty pages written from the LRU tail to free a page (MariaDB)"),
    "lru_freed": ("LRU-freed pages", "clean pages evicted from the LRU tail (MariaDB 10.6+)"),
    "flush_list_flushed": ("flush-list-flushed pages", "pages written by checkpoint flushing"),
    "pages_flushed": ("pages flushed", "all page writes"),
    "log_waits": ("log waits", "the log buffer was full"),
    "row_lock_waits": ("row-lock waits", "transactions that waited for a row lock"),
    "row_lock_time_ms": ("row-lock wait time (ms)", "time spent waiting for row locks"),
    "os_waits": ("OS waits", "threads that slept on a latch (MySQL; MariaDB prints none)"),
    "spin_rounds": ("spin rounds", "latch spin rounds (MySQL)"),
    "pending_fsyncs": ("pending fsyncs", "fsyncs not yet done at the window's end"),
    "checkpoint_age": ("checkpoint age (bytes)", "redo written since the last checkpoint: the largest sampled, "
                                                 "else at the window's end"),
    "free_pages_min": ("fewest free pages", "the buffer pool's free list at its shortest (sampled)"),
    "lock_waiters_max": ("most row-lock waiters", "transactions waiting for a row lock at once (sampled)"),
    "page_cleaner_warnings": ("page-cleaner warnings", "page-cleaner loops that overran, from the error log"),
    "oldest_trx_s": ("oldest transaction (s)", "the longest a transaction stayed open (sampled): a stuck one holds "
                                               "its row locks while the others queue"),
    "server_cpu_cores": ("server + driver CPU (cores)", "CPU of the sweep's processes (noise window)"),
    "iowait_share": ("iowait share", "the machine's iowait over the window"),
    "psi_io_some": ("I/O pressure", "share of the window some task stalled on I/O (PSI)"),
    "psi_cpu_some": ("CPU pressure", "share of the window some task waited for a CPU (PSI)"),
}


def evidence_columns(evidence: dict[str, Any] | None, noise: dict[str, Any] | None = None) -> dict[str, Any]:
    """One cell run's evidence and pressure as flat figures (None: not recorded or not reported)."""
    e = evidence or {}
    c = e.get("counters") or {}
    m = e.get("monitor") or {}
    end = m.get("end") or {}
    gauges = e.get("gauges_end") or {}
    w = (noise or {}).get("window") or {}
    pk = e.get("peaks") or {}
    pending = [v for v in (gauges.get("pending_fsyncs"), end.get("pending_fsyncs"), pk.get("pending_fsyncs_max"))
               if v is not None]
    age = next((v for v in (pk.get("checkpoint_age_max"), end.get("checkpoint_age"), gauges.get("checkpoint_age"))
                if v is not None), None)
    return {
        **{k: c.get(k) for k in ("free_page_waits", "lru_flushed", "lru_freed", "flush_list_flushed", "pages_flushed",
                                 "log_waits", "row_lock_waits", "row_lock_time_ms")},
        "os_waits": m.get("os_wait_reservations"), "spin_rounds": m.get("rw_spin_rounds"),
        "pending_fsyncs": max(pending) if pending else None,
        "checkpoint_age": age, "free_pages_min": pk.get("free_pages_min"),
        "lock_waiters_max": pk.get("row_lock_current_waits_max"),
        "page_cleaner_warnings": (e.get("page_cleaner") or {}).get("warnings"),
        "oldest_trx_s": (pk.get("oldest_trx") or {}).get("age_s"),
        "server_cpu_cores": w.get("ours_cores"), "iowait_share": w.get("iowait_share"),
        "psi_io_some": ((w.get("psi") or {}).get("io") or {}).get("some_stall_share"),
        "psi_cpu_some": ((w.get("psi") or {}).get("cpu") or {}).get("some_stall_share"),
    }
