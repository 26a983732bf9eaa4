"""Table moves on a real MariaDB 11.8 sandbox (TPC-C W=1) onto a real tmpfs while the TPC-C driver runs.

The shadow pt-online-schema-change fills is compared with the original by the test's own CHECKSUM TABLE at
the moment before the swap (after clients wrote through the triggers); the table's file is read from the
server on the tier, then home again, with no failed transaction and no restart.  A table that left its tier
behind innotier's back (a ``CREATE TABLE ... LIKE`` and swap) is reported by ``table-move status``, while the
statements that keep ``DATA DIRECTORY`` on 11.8 (``ALGORITHM=COPY``, ``TRUNCATE``) raise no false alarm.
And the error log's "Got error 123 when reading table" lines of TPC-C runs on 11.8 are identified: handler
error 123 is a snapshot-isolation conflict, which the client sees as 1020 and the driver retries.
"""

from __future__ import annotations

import json
import os

import pytest
from mysql.connector.errors import DatabaseError

import mvhelpers
from tmhelpers import Clients, checksum, sql

from datadir_mover.tablemove import store
from tuner.core import sandbox as sbx
from tuner.tpcc.loader import load
from tuner.tpcc.session import ER_CHECKREAD, classify

SERVER = "mariadb-11.8"
CRASH = "INNOTIER_MOVE_CRASH_AT"


@pytest.fixture(scope="module")
def m118(installed_server, innotier_home):
    """A running MariaDB 11.8 sandbox (16k pages, 256M buffer pool, as tests/servers' ``server_sandbox``) with
    TPC-C W=1 in `tpcc`; killed and destroyed at the end of the module."""
    installed_server(SERVER)
    sb = sbx.create("tablemove-11.8", page_size="16k", server=SERVER, options={"innodb_buffer_pool_size": "256M"})
    try:
        sb.start()
        load(sb.connection_spec(), warehouses=1, database="tpcc", drop=True, progress=False)
        yield sb
    finally:
        sb.destroy(force=True)


@pytest.fixture(scope="module")
def tier(mv_tiers):
    root = os.path.join(mv_tiers["tmpfs"], "tablemove-11.8")
    os.makedirs(root, exist_ok=True)
    return root


def _file(spec, schema: str, table: str) -> str:
    """The table's data file as the server names it, resolved (a datadir table's name is relative to it)."""
    (rows, ((datadir,),)) = sql(spec, "SELECT FILENAME FROM information_schema.INNODB_SYS_TABLESPACES "
                                      f"WHERE NAME = '{schema}/{table}'", "SELECT @@datadir")
    assert rows, f"InnoDB lists no tablespace for {schema}.{table}"
    return os.path.realpath(os.path.join(datadir, rows[0][0]))


def _open_move(sb) -> str:
    """The id of the sandbox's one unfinished table move (other servers' moves of the session aside)."""
    ids = [j.dir.name for j in store.all_journals()
           if j.plan().get("server_key") == f"sandbox:{sb.name}" and store.phase(j) == "open"]
    assert len(ids) == 1, ids
    return ids[0]


def _status(cli, move_id: str) -> tuple[int, dict]:
    r = cli("table-move", "status", "--id", move_id, "--json")
    assert r.returncode in (0, 1), r.stderr
    (row,) = json.loads(r.stdout)
    return r.returncode, row


@pytest.mark.root
def test_move_onto_tmpfs_and_back_while_tpcc_runs(m118, tier, cli, innotier_home):
    spec = m118.connection_spec("tpcc")
    pid = m118.running_pid()
    assert pid
    home_file = _file(spec, "tpcc", "district")
    assert home_file == os.path.join(os.path.realpath(m118.datadir), "tpcc", "district.ibd")
    clients = Clients(m118.name, spec)
    # killed right after the copy: the shadow and its triggers stay, and clients keep writing through them
    r = cli("table-move", "apply", "tpcc.district", "--to", tier, "--sandbox", m118.name, "--yes",
            "--i-accept-volatile", env={CRASH: "COPY:done"})
    assert r.returncode == -9, r.stderr
    move_id = _open_move(m118)
    shadow = json.loads((innotier_home / "table-moves" / move_id / "plan.json").read_text())["shadow_table"]
    clients.wait_for_commits()
    first = clients.stop()
    assert first["errors"] == 0, first.get("error_messages")
    # the two sides of the swap, equal by the server's own checksum after the clients' writes
    assert checksum(spec, "tpcc.district") == checksum(spec, f"tpcc.{shadow}")
    assert _file(spec, "tpcc", shadow) == os.path.join(tier, "tpcc", f"{shadow}.ibd")

    clients = Clients(m118.name, spec)
    r = cli("table-move", "resume", "--id", move_id, "--json")
    assert r.returncode == 0, r.stderr
    moved = json.loads(r.stdout)
    on_tier = os.path.join(tier, "tpcc", "district.ibd")
    assert moved["phase"] == "committed" and moved["file"] == on_tier and moved["digest"].startswith("10 rows")
    assert _file(spec, "tpcc", "district") == on_tier and os.path.isfile(on_tier)  # really on the tier
    assert not os.path.exists(home_file)
    clients.wait_for_commits()  # New-Orders keep committing on the moved table
    code, row = _status(cli, move_id)
    assert (code, row["phase"], row["drifted"], row["where"]) == (0, "committed", False, on_tier), row
    r = cli("table-move", "back", "--id", move_id, "--yes", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["phase"] == "home"
    clients.wait_for_commits()
    second = clients.stop()
    assert second["errors"] == 0, second.get("error_messages")
    assert _file(spec, "tpcc", "district") == home_file and not os.path.exists(on_tier)
    assert sql(spec, "SHOW TABLES FROM tpcc LIKE '\\_district%'")[0] == []
    assert sql(spec, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'tpcc'")[0][0][0] == 0
    assert m118.running_pid() == pid  # no restart
    mvhelpers.data_consistent(spec)


@pytest.mark.root
def test_status_reports_a_table_rebuilt_back_into_the_datadir(m118, tier, cli):
    """ALGORITHM=COPY and TRUNCATE keep DATA DIRECTORY on 11.8 (status stays quiet, as the server's file says);
    a CREATE TABLE ... LIKE and swap lands the table in the datadir, and status reports it and exits 1."""
    spec = m118.connection_spec()
    sql(spec, "CREATE DATABASE drift", "CREATE TABLE drift.t (id INT PRIMARY KEY, v VARCHAR(40))",
        "INSERT INTO drift.t VALUES " + ", ".join(f"({n}, 'row {n}')" for n in range(1, 501)))
    r = cli("table-move", "apply", "drift.t", "--to", tier, "--sandbox", m118.name, "--yes", "--i-accept-volatile",
            "--json")
    assert r.returncode == 0, r.stderr
    move_id = json.loads(r.stdout)["move_id"]
    on_tier = os.path.join(tier, "drift", "t.ibd")
    assert _file(spec, "drift", "t") == on_tier
    assert _status(cli, move_id)[0] == 0

    for statement in ("ALTER TABLE drift.t ENGINE=InnoDB, ALGORITHM=COPY", "TRUNCATE TABLE drift.t"):
        sql(spec, statement)
        assert _file(spec, "drift", "t") == on_tier, statement  # 11.8.9 keeps DATA DIRECTORY here
        code, row = _status(cli, move_id)
        assert (code, row["drifted"], row["where"]) == (0, False, on_tier), (statement, row)

    # the fault: a copy made with CREATE TABLE ... LIKE (which drops DATA DIRECTORY) swapped in by hand
    sql(spec, "CREATE TABLE drift.t2 LIKE drift.t", "INSERT INTO drift.t2 SELECT * FROM drift.t",
        "RENAME TABLE drift.t TO drift.t_old, drift.t2 TO drift.t", "DROP TABLE drift.t_old")
    in_datadir = os.path.join(os.path.realpath(m118.datadir), "drift", "t.ibd")
    assert _file(spec, "drift", "t") == in_datadir  # the fault is in place: the server reads the datadir's file
    code, row = _status(cli, move_id)
    assert code == 1 and row["drifted"] and os.path.realpath(row["where"]) == in_datadir, row
    assert row["problem"].startswith(f"drift.t is no longer where move {move_id} put it"), row
    r = cli("table-move", "status")
    assert r.returncode == 1 and f"{move_id}: drift.t is no longer where move" in r.stdout


def test_got_error_123_in_the_log_is_a_retried_snapshot_isolation_conflict(m118):
    """MariaDB 11.8 logs "[ERROR] Got error 123 when reading table './tpcc/stock'" during TPC-C runs (recorded in
    tests/fixtures/recorded/innodb-status/mariadb-11.8-error.log, no table move involved).  123 is the handler
    error HA_ERR_RECORD_CHANGED: with innodb_snapshot_isolation=ON (the default since 11.6.2) a locking read of
    a row changed after the transaction's read view fails; the client gets 1020, which the driver retries, and
    the server also logs it (sql_select.cc's report_handler_error exempts only deadlocks, lock wait timeouts
    and changed table definitions).  Reproduced here with two sessions, and gone with snapshot isolation off."""
    spec = m118.connection_spec()
    sql(spec, "CREATE DATABASE IF NOT EXISTS snap", "CREATE TABLE snap.t (id INT PRIMARY KEY, n INT)",
        "INSERT INTO snap.t VALUES (1, 0)")
    log = m118.error_log
    assert sql(spec, "SELECT @@GLOBAL.innodb_snapshot_isolation")[0][0][0] == 1  # 11.8's default: what TPC-C meets

    def conflict(isolation: str) -> tuple[Exception | None, str]:
        offset = log.stat().st_size
        reader, writer = spec.connect(), spec.connect()
        try:
            cur = reader.cursor()
            cur.execute(f"SET SESSION innodb_snapshot_isolation = {isolation}")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute("SELECT n FROM snap.t WHERE id = 1")
            cur.fetchall()
            writer.cursor().execute("UPDATE snap.t SET n = n + 1 WHERE id = 1")  # autocommit: after the read view
            try:
                cur.execute("SELECT n FROM snap.t WHERE id = 1 FOR UPDATE")
                cur.fetchall()
                error = None
            except DatabaseError as exc:
                error = exc
            cur.execute("ROLLBACK")
        finally:
            reader.close()
            writer.close()
        with open(log, "rb") as fh:
            fh.seek(offset)
            return error, fh.read().decode(errors="replace")

    error, logged = conflict("ON")
    assert error is not None and error.errno == ER_CHECKREAD, error
    assert classify(error) == "retry"  # the TPC-C driver retries it: not a failed transaction
    assert "[ERROR] Got error 123 when reading table './snap/t'" in logged, logged
    error, logged = conflict("OFF")
    assert error is None and "Got error" not in logged
