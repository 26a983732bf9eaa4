"""The post-start check's evidence on real MySQL 9.7, where the commit block is FLUSH TABLES WITH READ LOCK.

A commit waiting on it ("Waiting for commit lock") is counted with the tables it locked (named by
performance_schema.data_locks); a write that waits for the global read lock before it has begun is
not; prepared reads leave the row counters (Innodb_rows_*) at zero while Com_stmt_execute counts them;
the tables written since the start are named (``tables_written``), those written before it are not.
"""

from __future__ import annotations

import threading

import pytest

import mvhelpers
from datadir_mover.move import read_lock
from datadir_mover.move.server_check import table_sample, tables_written, waiting_commits
from waiting import wait_for


def _sql(spec, *statements):
    return mvhelpers.sql(spec.with_database(None), *statements)


@pytest.mark.slow
def test_commits_waiting_on_flush_tables_with_read_lock_and_row_writes(server_sandbox):
    sb = server_sandbox("mysql-9.7")
    spec = sb.connection_spec()
    _sql(spec, "CREATE DATABASE mvs", "CREATE TABLE mvs.t (id INT PRIMARY KEY) ENGINE=InnoDB",
         "CREATE TABLE mvs.u (id INT PRIMARY KEY) ENGINE=InnoDB")
    pending = mvhelpers.PendingCommit(spec, "INSERT INTO mvs.t VALUES (1)")  # its row is written before the block
    holder = spec.with_database(None).connect()
    assert read_lock.block_writes(holder) == read_lock.SQL_READ_LOCK
    writer = threading.Thread(target=lambda: _sql(spec, "INSERT INTO mvs.u VALUES (1)"), daemon=True)
    writer.start()
    pending.start_waiting(spec)
    wait_for(lambda: _sql(spec, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                                "WHERE STATE = 'Waiting for global read lock'")[0][0], 20,
             "the autocommit insert waits for the global read lock")
    now = waiting_commits.read(holder)
    assert now.count == 1 and now.commits[0].tables == ["mvs.t"] and now.commits[0].tables_locked == 1, now
    holder.close()
    pending.thread.join(20)
    writer.join(20)
    assert pending.outcome == ["committed"]

    sb.stop("clean")
    sb.start()
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor(prepared=True)
        for i in range(20):
            cur.execute("SELECT id FROM mvs.t WHERE id = ?", (i,))
            cur.fetchall()
        cur.close()
        assert table_sample.row_writes(conn) == 0
        status = dict(_sql(spec, "SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'"))
        assert int(status["Com_stmt_execute"]) >= 20, status
        assert tables_written.since_start(conn) == set()  # both tables were written before the restart only
        conn.cursor().execute("INSERT INTO mvs.u VALUES (2)")
        conn.commit()
        assert table_sample.row_writes(conn) == 1
        assert tables_written.since_start(conn) == {"mvs.u"}  # the per-table evidence benign.py accepts
    finally:
        conn.close()
        _sql(spec, "DROP DATABASE mvs")
