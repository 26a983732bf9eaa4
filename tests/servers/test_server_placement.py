"""Placement on real MySQL 9.7 and MariaDB 11.8 sandboxes (TPC-C W=1): a short built-in TPC-C window measured
from performance_schema through the CLI, priced on a real tmpfs and advised under a budget; and the refusals
of a server that cannot say where its I/O goes, each one line naming the fix, nothing stored; and a sweep
cell's tables placed on MySQL 9.7 (general tablespaces in a directory listed in innodb_directories).

What differs by flavor and is asserted here: MySQL 9.7 times its redo (``#innodb_redo/#ib_redoN``) in
performance_schema and keeps doublewrite in ``#ib_16384_N.dblwr``; MariaDB 11.8 does not instrument its
redo (counted from status, ``ib_logfile0``) and has three undo tablespaces by default.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from datadir_mover.tablemove.register import OPTION_FILE
from tuner.core.errors import ServerError, SweepError
from tuner.core.server import Flavor
from tuner.placement import measure, tiercost
from tuner.placement.model import FileIo, IoProfile
from tuner.placement.store import PlacementStore
from tuner.sweep import table_placement
from tuner.tpcc.loader import load

SERVERS = ("mysql-9.7", "mariadb-11.8")
TPCC_TABLES = ("warehouse", "district", "customer", "history", "new_order", "orders", "order_line", "item", "stock")
MIB = 1 << 20
BUDGET = 32 * MIB


@pytest.fixture(scope="module")
def results(innotier_home):
    return os.path.join(innotier_home, "placesrv-results.db")


@pytest.fixture(scope="module")
def fast_tier(mv_tiers, results) -> dict:
    """The session's real tmpfs, priced by fio once for the module (the tier does not depend on the server; the
    command itself is tested in tests/placement/test_placement_live.py)."""
    cost = tiercost.characterize(mv_tiers["tmpfs"], size_bytes=8 * MIB, runtime_s=1)
    with PlacementStore(results) as store:
        store.put_tier(cost)
    return cost.to_dict()


@pytest.fixture(scope="module")
def loaded(server_sandbox):
    """server -> the module's sandbox of that server with TPC-C W=1 loaded (once), restarted with a cold buffer
    pool: the load left every page cached, so a short window would read nothing from the tables' files (and
    whether the page cleaner writes some of them in it is up to its timing); cold, every New-Order reads
    item, stock and customer pages from their files."""
    done = {}

    def get(server: str):
        if server not in done:
            sb = server_sandbox(server)
            load(sb.connection_spec(), warehouses=1, database="tpcc", drop=True, progress=False)
            (sb.conf_d / "60-placesrv-cold.cnf").write_text("[mysqld]\ninnodb_buffer_pool_load_at_startup = OFF\n")
            sb.stop("clean")
            sb.start()
            done[server] = sb
        return done[server]

    return get


def _sql(spec, *statements: str) -> None:
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        for s in statements:
            cur.execute(s)
    finally:
        conn.close()


def _stored(results: str, table: str) -> int:
    with sqlite3.connect(results) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def _one_line(r, code: int, *words: str) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("innotier: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.mark.root
@pytest.mark.parametrize("server", SERVERS)
def test_a_tpcc_window_is_measured_and_advised(server, loaded, fast_tier, results, cli):
    sb = loaded(server)
    datadir = os.path.realpath(sb.datadir)
    flavor, version = server.split("-")
    if flavor == "mysql":  # a general tablespace in the datadir: its file name does not say which table is in it
        _sql(sb.connection_spec(), "CREATE TABLESPACE placesrv_ts ADD DATAFILE 'placesrv_ts.ibd'",
             "CREATE TABLE tpcc.placesrv_gt (id INT PRIMARY KEY, v VARCHAR(100)) TABLESPACE placesrv_ts",
             "INSERT INTO tpcc.placesrv_gt VALUES (1, 'one')")
    r = cli("placement", "measure", "--sandbox", sb.name, "--during-tpcc", "--clients", "2", "--warmup", "1",
            "--duration", "4", "--interval", "1", "--results", results, "--json")
    assert r.returncode == 0, r.stderr
    p = IoProfile.from_dict(json.loads(r.stdout))
    assert p.server["flavor"] == flavor and p.server["version"].startswith(version)
    assert p.workload["result"]["errors"] == 0 and p.workload["result"]["counts"]["new_order"]["commit"] > 0
    assert len(p.intervals) >= 3
    totals = p.file_totals()
    by_key = {c.key: c for c in p.candidates}

    # every TPC-C table is a candidate: its own .ibd in the datadir, sized as the file is
    for t in TPCC_TABLES:
        c = by_key[f"tpcc.{t}"]
        assert c.kind == "table" and c.files == (os.path.join(datadir, "tpcc", f"{t}.ibd"),), c
        assert c.size_bytes == os.stat(c.files[0]).st_size
    # with a cold buffer pool, the tables every New-Order reads waited on reads of their files in the window
    io = {t: totals.get(by_key[f"tpcc.{t}"].files[0], FileIo()) for t in TPCC_TABLES}
    read = [t for t in ("item", "stock", "customer") if io[t].reads > 0 and io[t].read_s > 0]
    assert len(read) >= 2, io   # hundreds each when watched; one run of seven failed the all-three form
    # and the rows the driver wrote are in the window's row activity
    assert p.tables["tpcc.new_order"].insert > 0 and p.tables["tpcc.order_line"].insert > 0

    redo = by_key["redo"]
    redo_io = FileIo()
    for f in redo.files:
        redo_io = redo_io + totals.get(f, FileIo())
    assert redo_io.writes > 0 and redo.size_bytes > 0
    if flavor == "mysql":
        # timed by performance_schema, in the redo directory; fsyncs are the misc operations
        assert all(os.path.dirname(f) == os.path.join(datadir, "#innodb_redo") for f in redo.files), redo.files
        assert redo_io.timed and redo_io.misc > 0 and redo_io.wait_s > 0
        assert not any("not in performance_schema" in n for n in p.notes)
        assert by_key["doublewrite"].files and all(os.path.basename(f).startswith("#ib_16384_")
                                                   for f in by_key["doublewrite"].files)
    else:
        assert redo.files == (os.path.join(datadir, "ib_logfile0"),)
        assert not redo_io.timed and any("not in performance_schema" in n for n in p.notes)
        assert "doublewrite" not in by_key       # MariaDB keeps it in ibdata
    assert by_key["undo"].size_bytes > 0 and by_key["ibdata"].size_bytes > 0
    if flavor == "mysql":
        general = os.path.join(datadir, "placesrv_ts.ibd")
        assert by_key["tpcc.placesrv_gt"].files == (general,) and general not in p.other_files
        assert os.path.join(datadir, "mysql.ibd") in p.other_files    # the system tables' tablespace: not offered

    r = cli("placement", "advise", "--budget", "32M", "--tier", fast_tier["mountpoint"], "--profile", p.profile_id,
            "--results", results, "--json")
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    pick = a["pick"]
    assert pick["keys"], a                                            # something is worth moving
    assert pick["size_bytes"] == sum(by_key[k].size_bytes for k in pick["keys"]) <= BUDGET
    everything = {n["name"]: n for n in a["naive"]}["everything"]
    assert 0 < pick["saving"] <= everything["saving"] + 1e-12
    # the exact pick lies on the curve between its points on either side of the budget
    below = max(g for b, g in a["curve"] if b <= BUDGET)
    above = min((g for b, g in a["curve"] if b >= BUDGET), default=a["curve"][-1][1])
    assert below - 1e-12 <= pick["saving"] <= above + 1e-12
    if flavor == "mysql":
        assert a["gains"]["redo"] > 0 and "redo alone" in {n["name"] for n in a["naive"]}
    else:
        assert "redo" not in a["gains"] and any("not priced: redo" in n for n in a["notes"])


@pytest.mark.root
def test_bad_budgets_and_tiers_are_one_line(server_sandbox, fast_tier, results, cli):
    """On a real profile: a budget smaller than every candidate, larger than the tier's free space, a tier never
    characterized.  advise stores nothing, so 'nothing changed' is the results store as it was."""
    sb = server_sandbox("mysql-9.7")
    if not _stored(results, "io_profiles"):   # this test alone: a short window first
        assert cli("placement", "measure", "--sandbox", sb.name, "--seconds", "1", "--interval", "1",
                   "--results", results).returncode == 0
    before = (_stored(results, "io_profiles"), _stored(results, "tier_costs"))
    tier = fast_tier["mountpoint"]
    _one_line(cli("placement", "advise", "--budget", "512K", "--tier", tier, "--results", results), 2,
              "smaller than every candidate", "needs 1M", "give a larger --budget")
    _one_line(cli("placement", "advise", "--budget", "1T", "--tier", tier, "--results", results), 2,
              f"free on {tier}", "or less, or free space")
    _one_line(cli("placement", "advise", "--budget", "32M", "--tier", "/placesrv-not-a-tier", "--results", results),
              2, "no stored tier costs for /placesrv-not-a-tier", "innotier placement tier --mount")
    assert (_stored(results, "io_profiles"), _stored(results, "tier_costs")) == before


@pytest.mark.root
def test_mysql_with_its_file_instruments_off_is_refused_until_the_named_fix(server_sandbox, results, cli):
    """The fault: the InnoDB file instruments switched off at runtime.  measure refuses in one line that names
    the statements to run, stores nothing; running exactly those statements makes the server measurable."""
    sb = server_sandbox("mysql-9.7")
    spec = sb.connection_spec()
    conn = spec.connect()
    cur = conn.cursor()
    try:
        cur.execute("UPDATE performance_schema.setup_instruments SET ENABLED = 'NO', TIMED = 'NO' "
                    "WHERE NAME LIKE 'wait/io/file/innodb/%'")
        before = _stored(results, "io_profiles") if os.path.exists(results) else 0
        line = _one_line(cli("placement", "measure", "--sandbox", sb.name, "--seconds", "1", "--interval", "1",
                             "--results", results), 3, "InnoDB file instruments", "are not enabled and timed")
        assert (_stored(results, "io_profiles") if os.path.exists(results) else 0) == before
        for statement in (measure.ENABLE_FILE_INSTRUMENTS,
                          "UPDATE setup_consumers SET ENABLED='YES' WHERE NAME='global_instrumentation'"):
            assert statement in line
    finally:
        cur.execute(measure.ENABLE_FILE_INSTRUMENTS)          # the fix the line names
        cur.execute("UPDATE performance_schema.setup_consumers SET ENABLED='YES' "
                    "WHERE NAME='global_instrumentation'")
    measure.check_source(conn, spec.describe())             # measurable again
    conn.close()


@pytest.mark.root
def test_mariadb_11_8_without_performance_schema_names_the_restart(server_sandbox, results, cli):
    """The fault: performance_schema=OFF in a conf.d drop-in, restarted.  One line naming the restart, nothing
    stored; the fix it names (performance_schema=ON in a conf.d file, restart) makes the server measurable."""
    sb = server_sandbox("mariadb-11.8")
    off, on = sb.conf_d / "60-placesrv-ps-off.cnf", sb.conf_d / "61-placesrv-ps-on.cnf"
    off.write_text("[mysqld]\nperformance_schema = OFF\n")
    try:
        sb.stop("clean")
        sb.start()
        before = _stored(results, "io_profiles") if os.path.exists(results) else 0
        _one_line(cli("placement", "measure", "--sandbox", sb.name, "--seconds", "1", "--interval", "1",
                      "--results", results), 3, "performance_schema is OFF", "conf.d",
                  f"`innotier sandbox stop {sb.name}`, then `start`")
        assert (_stored(results, "io_profiles") if os.path.exists(results) else 0) == before
        on.write_text("[mysqld]\nperformance_schema = ON\n")   # the fix, as the line words it
        sb.stop("clean")
        sb.start()
        conn = sb.connection_spec().connect()
        try:
            measure.check_source(conn, sb.name, sb.name)
        finally:
            conn.close()
    finally:
        off.unlink(missing_ok=True)
        on.unlink(missing_ok=True)


def _rows(conn, statement: str) -> list[tuple]:
    cur = conn.cursor()
    cur.execute(statement)
    rows = cur.fetchall() if cur.with_rows else []
    cur.close()
    return rows


@pytest.mark.root
def test_mysql_cell_tables_go_to_general_tablespaces_in_its_directory(server_sandbox, mv_tiers):
    """Sweep table placement on MySQL 9.7, tiny tables: ``prepare_directories`` lists the cell's directory in
    innodb_directories in the sandbox's option files before the start (a cell's sandbox is new, so the runner
    needs no extra restart; this module's sandbox runs already, so here it is restarted once); each table is
    rebuilt into a general tablespace of its own there, its rows unchanged and its file read back from the
    server.  Faults: a directory the server was not started with is refused in one line, the table left where it
    was; a table taken back into the datadir behind the cell's back fails ``verify``."""
    sb = server_sandbox("mysql-9.7")
    cell, unknown = Path(mv_tiers["tmpfs"]) / "placesrv-cell" / "tables", Path(mv_tiers["tmpfs"]) / "placesrv-unknown"
    keys = ("placetab.t", "placetab.u")
    assert table_placement.prepare_directories(sb, {k: cell for k in keys}) == [str(cell)]
    assert cell.is_dir() and f"innodb_directories={cell}" in (sb.conf_d / OPTION_FILE).read_text()
    sb.stop("clean")
    sb.start()
    spec = sb.connection_spec()
    _sql(spec, "DROP DATABASE IF EXISTS placetab", "CREATE DATABASE placetab",
         "CREATE TABLE placetab.t (id INT PRIMARY KEY, v VARCHAR(40), KEY (v))", "CREATE TABLE placetab.u LIKE placetab.t",
         "INSERT INTO placetab.t VALUES " + ", ".join(f"({n}, 'row {n}')" for n in range(1, 2001)),
         "INSERT INTO placetab.u SELECT * FROM placetab.t WHERE id <= 300")
    conn = spec.connect()
    try:
        before = _rows(conn, "CHECKSUM TABLE placetab.t, placetab.u")
        in_datadir = os.path.realpath(os.path.join(sb.datadir, "placetab", "t.ibd"))
        with pytest.raises(SweepError, match="ERROR 3121") as err:
            table_placement.place_tables(conn, Flavor.MYSQL, {"placetab.t": unknown})
        assert "\n" not in str(err.value) and str(unknown) in str(err.value)
        assert os.path.realpath(table_placement.where_now(conn, Flavor.MYSQL, {"placetab.t": unknown})
                                ["placetab.t"]["path"]) == in_datadir

        placed = table_placement.place_tables(conn, Flavor.MYSQL, {k: cell for k in keys})
        for k in keys:
            path = str(cell / f"innotier_placetab_{k.split('.')[1]}.ibd")
            assert (placed[k]["dir"], placed[k]["path"]) == (str(cell), path) and placed[k]["bytes"] > 0, placed[k]
            assert os.path.isfile(path)  # really on the tier
        assert _rows(conn, "CHECKSUM TABLE placetab.t, placetab.u") == before  # the same rows
        assert all(v["under"] for v in table_placement.verify(conn, Flavor.MYSQL, {k: cell for k in keys}).values())

        # taken back: the table rebuilt into its own file in the datadir, behind the cell's back
        _rows(conn, "ALTER TABLE placetab.t TABLESPACE=innodb_file_per_table")
        with pytest.raises(SweepError, match="elsewhere: placetab.t at ") as err:
            table_placement.verify(conn, Flavor.MYSQL, {k: str(cell) for k in keys})
        assert "\n" not in str(err.value) and "placetab/t.ibd" in str(err.value) and "placetab.u" not in str(err.value)
    finally:
        _rows(conn, "DROP DATABASE IF EXISTS placetab")
        for (name,) in _rows(conn, "SELECT NAME FROM information_schema.INNODB_TABLESPACES "
                                   "WHERE NAME LIKE 'innotier\\_placetab\\_%'"):
            _rows(conn, f"DROP TABLESPACE `{name}`")  # MySQL has no DROP TABLESPACE IF EXISTS
        conn.close()
