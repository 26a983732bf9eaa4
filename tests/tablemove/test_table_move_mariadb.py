"""Table moves on a real MariaDB 10.11 sandbox (the shared one, TPC-C W=1) onto a real tmpfs, clients running.

The shadow table pt-online-schema-change fills is compared with the original by the test's own CHECKSUM
TABLE (not the move's digest code) after clients wrote through the triggers; a shadow made to differ is
refused at VERIFY and nothing is swapped; bad input is one line and changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import mvhelpers
from tmhelpers import Clients, checksum, file_of, sql

CRASH = "INNOTIER_MOVE_CRASH_AT"


@pytest.fixture(scope="module")
def tier(mv_tiers):
    root = os.path.join(mv_tiers["tmpfs"], "tablemove")
    os.makedirs(root, exist_ok=True)
    return root


def _journals(innotier_home) -> list[str]:
    d = innotier_home / "table-moves"
    return sorted(os.listdir(d)) if d.is_dir() else []


def _open_plan(innotier_home) -> dict:
    """The plan of the newest table move (its shadow's name is unique to it)."""
    newest = _journals(innotier_home)[-1]
    return json.loads((innotier_home / "table-moves" / newest / "plan.json").read_text())


def _tree(root) -> list[str]:
    return sorted(os.path.join(d, n) for d, dirs, files in os.walk(root) for n in dirs + files)


def _no_side_tables(spec) -> bool:
    return (sql(spec, "SHOW TABLES FROM tpcc LIKE '\\_district%'")[0] == []
            and sql(spec, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'tpcc'")[0][0][0] == 0)


@pytest.mark.root
def test_move_onto_tmpfs_and_back_with_clients_running(tpcc_w1, shared_sandbox, tier, cli, innotier_home):
    spec = tpcc_w1
    home_file = file_of(spec, "tpcc", "district")
    clients = Clients(shared_sandbox.name, spec)
    # killed right after the copy: the shadow and its triggers stay, clients keep writing through them
    r = cli("table-move", "apply", "tpcc.district", "--to", tier, "--sandbox", shared_sandbox.name, "--yes",
            "--i-accept-volatile", env={CRASH: "COPY:done"})
    assert r.returncode == -9, r.stderr
    clients.wait_for_commits()
    first = clients.stop()
    assert first["errors"] == 0
    shadow = _open_plan(innotier_home)["shadow_table"]
    assert checksum(spec, "tpcc.district") == checksum(spec, f"tpcc.{shadow}")  # both sides, after the writes
    assert file_of(spec, "tpcc", shadow) == os.path.join(tier, "tpcc", f"{shadow}.ibd")

    clients = Clients(shared_sandbox.name, spec)
    r = cli("table-move", "resume", "--json")
    assert r.returncode == 0, r.stderr
    moved = json.loads(r.stdout)
    on_tier = os.path.join(tier, "tpcc", "district.ibd")
    assert moved["phase"] == "committed" and moved["file"] == on_tier and moved["digest"].startswith("10 rows")
    assert file_of(spec, "tpcc", "district") == on_tier and os.path.isfile(on_tier)  # really on the tier
    assert not os.path.exists(home_file)
    clients.wait_for_commits()  # New-Orders keep committing on the moved table
    r = cli("table-move", "back", "tpcc.district", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["phase"] == "home"
    clients.wait_for_commits()
    second = clients.stop()
    assert second["errors"] == 0
    assert file_of(spec, "tpcc", "district") == "./tpcc/district.ibd" and not os.path.exists(on_tier)
    assert _no_side_tables(spec)
    mvhelpers.data_consistent(spec)
    st = json.loads(cli("table-move", "status", "--json").stdout)
    assert {r["phase"] for r in st if r["table"] == "tpcc.district"} == {"home"}  # other tests' moves aside


@pytest.mark.root
def test_a_shadow_that_differs_is_never_swapped(tpcc_w1, shared_sandbox, tier, cli, innotier_home):
    spec = tpcc_w1
    before = checksum(spec, "tpcc.district")
    r = cli("table-move", "apply", "tpcc.district", "--to", tier, "--sandbox", shared_sandbox.name, "--yes",
            "--i-accept-volatile", "--pace", "0.01", env={CRASH: "COPY:done"})  # a paced copy, as complete
    assert r.returncode == -9, r.stderr
    plan = _open_plan(innotier_home)
    assert plan["request"]["copy_pause_s"] == 0.01 and any(n.startswith("paced copy: 0.01 s") for n in plan["notes"])
    shadow = plan["shadow_table"]
    sql(spec, f"UPDATE tpcc.{shadow} SET d_ytd = d_ytd + 1 WHERE d_id = 3")  # the fault: a wrong copy
    r = cli("table-move", "resume")
    assert r.returncode == 7
    assert r.stderr.strip().startswith(f"innotier: the copy {shadow} differs from tpcc.district")
    assert file_of(spec, "tpcc", "district") == "./tpcc/district.ibd"  # not swapped
    assert checksum(spec, "tpcc.district") == before
    r = cli("table-move", "back", "tpcc.district", "--yes")
    assert r.returncode == 0, r.stderr
    assert _no_side_tables(spec)
    assert os.listdir(os.path.join(tier, "tpcc")) == []


@pytest.mark.root
def test_bad_input_is_one_line_and_changes_nothing(tpcc_w1, shared_sandbox, tier, cli, innotier_home):
    spec = tpcc_w1
    sql(spec, "CREATE TABLE IF NOT EXISTS tpcc.placemove_nopk (a INT, b INT)")
    try:
        journals, files = _journals(innotier_home), sorted(os.listdir(tier))
        sb = ["--sandbox", shared_sandbox.name]
        cases = [
            (["tpcc.no_such_table", "--to", tier, "--i-accept-volatile"], "no table tpcc.no_such_table"),
            (["tpcc.district", "--to", tier], "is on a volatile tier (tmpfs) and no persistence backing"),
            (["tpcc.placemove_nopk", "--to", tier, "--i-accept-volatile"], "has no primary key"),
            (["tpcc.district", "--to", tier + "/not-mounted", "--i-accept-volatile"], "is not a directory"),
            (["tpcc.district", "--to", "relative/dir"], "is not an absolute path"),
        ]
        for args, words in cases:
            r = cli("table-move", "apply", *args, *sb, "--yes")
            assert r.returncode == 7, (args, r.stderr)
            assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        r = cli("table-move", "apply", "tpcc.district", "--to", tier, "--i-accept-volatile", "--pace", "-1", *sb, "--yes")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr  # a usage error
        assert "--pace takes seconds from 0 to 10 (got -1)" in r.stderr
        assert _journals(innotier_home) == journals and sorted(os.listdir(tier)) == files
        assert file_of(spec, "tpcc", "district") == "./tpcc/district.ibd"
    finally:
        sql(spec, "DROP TABLE IF EXISTS tpcc.placemove_nopk")


@pytest.mark.root
def test_a_tier_not_mounted_or_too_small_or_an_unconfirmed_move_changes_nothing(tpcc_w1, shared_sandbox, tier, cli,
                                                                               innotier_home):
    """A tier root whose tier is not mounted (an empty mount point on the datadir's disk), a real tmpfs too small
    for the table, and a move nobody confirmed (no --yes, no terminal): one line each naming the fix."""
    spec = tpcc_w1
    unmounted, small = innotier_home / "placesrv-unmounted", innotier_home / "placesrv-small"
    unmounted.mkdir(exist_ok=True)
    small.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M,mode=0755", "tmpfs", str(small)], check=True)
    try:
        journals, on_tier = _journals(innotier_home), _tree(tier)
        sb = ["--sandbox", shared_sandbox.name, "--i-accept-volatile"]
        cases = [
            (["tpcc.stock", "--to", str(unmounted), "--yes"], 7,
             ("is on the same file system as", "if the tier is not mounted there, mount it")),
            (["tpcc.stock", "--to", str(small), "--yes"], 7,
             ("free but the move needs", "free space on the tier or choose a larger one")),
            (["tpcc.district", "--to", tier], 2,
             ("needs confirmation; standard input is not a terminal, so pass --yes",)),
        ]
        for args, code, words in cases:
            r = cli("table-move", "apply", *args, *sb, input="")
            assert r.returncode == code, (args, r.stderr)
            assert len(r.stderr.strip().splitlines()) == 1, r.stderr
            assert all(w in r.stderr for w in words), r.stderr
        assert _journals(innotier_home) == journals
        assert os.listdir(small) == [] and os.listdir(unmounted) == [] and _tree(tier) == on_tier
        assert file_of(spec, "tpcc", "stock") == "./tpcc/stock.ibd"
        assert file_of(spec, "tpcc", "district") == "./tpcc/district.ibd"
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_a_read_view_older_than_a_moved_table_is_retried():
    """MySQL's online ALTER ... TABLESPACE commits a new table version; a TPC-C transaction whose read view is
    older gets 1412 (measured: one per terminal in bench/table_move_bench.py) and must be retried, not failed."""
    from mysql.connector.errors import DatabaseError

    from tuner.tpcc.session import classify

    assert classify(DatabaseError(msg="Table definition has changed, please retry transaction", errno=1412)) == "retry"


@pytest.mark.root
def test_the_triggers_are_created_only_under_the_table_lock(tpcc_w1, shared_sandbox, tier, cli, innotier_home):
    """Created on a busy table, MariaDB 10.11's triggers failed concurrent statements with 1146 on the shadow
    (docs/table-moves.md); the copier now creates them under LOCK TABLES t WRITE, shadow WRITE.  Shown here
    without timing: a client holds the table (an open transaction); the move's lock waits for it, and while
    it waits the table has no trigger; after the client commits the move completes, and home again."""
    import threading

    from waiting import wait_for

    spec = tpcc_w1
    client = spec.with_database(None).connect()
    moved: list = []
    try:
        cur = client.cursor()
        cur.execute("START TRANSACTION")
        cur.execute("SELECT COUNT(*) FROM tpcc.district")
        cur.fetchall()  # the client's transaction holds district's metadata lock until it commits
        mover = threading.Thread(target=lambda: moved.append(cli(
            "table-move", "apply", "tpcc.district", "--to", tier, "--sandbox", shared_sandbox.name, "--yes",
            "--i-accept-volatile")))
        mover.start()
        waiting = ("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'LOCK TABLES `tpcc`.`district` "
                   "WRITE%' AND STATE LIKE 'Waiting for table metadata lock%'")
        wait_for(lambda: sql(spec, waiting)[0][0][0] == 1, 120, "the copier's LOCK TABLES to wait for the client")
        triggers = sql(spec, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_TABLE = 'district'")
        assert triggers[0][0][0] == 0  # nothing created before the lock is held
        cur.execute("COMMIT")
        mover.join(300)
        assert not mover.is_alive() and moved and moved[0].returncode == 0, moved and moved[0].stderr
    finally:
        client.close()
    assert file_of(spec, "tpcc", "district").startswith(os.path.realpath(tier))
    log = (innotier_home / "table-moves" / _journals(innotier_home)[-1] / "pt-osc.log").read_text()
    assert "Created triggers OK" in log
    r = cli("table-move", "back", "tpcc.district", "--yes")
    assert r.returncode == 0, r.stderr
    assert _no_side_tables(spec)


@pytest.mark.root
def test_the_plan_says_when_the_copy_crowds_the_redo_log(tpcc_w1, shared_sandbox, tier, cli, innotier_home):
    """The redo log shrunk online (MariaDB 10.9+) below the table: the plan names the sizes and the resize; its
    own size put back after."""
    spec = tpcc_w1
    size = int(sql(spec, "SELECT @@innodb_log_file_size")[0][0][0])
    args = ["table-move", "plan", "tpcc.stock", "--to", tier, "--sandbox", shared_sandbox.name, "--i-accept-volatile"]
    journals = _journals(innotier_home)
    sql(spec, f"SET GLOBAL innodb_log_file_size = {16 << 20}")  # the least it takes (innodb_log_buffer_size)
    try:
        r = cli(*args, "--json")
        assert r.returncode == 0, r.stderr
        notes = [n for n in json.loads(r.stdout)["notes"] if n.startswith("redo: ")]
        assert len(notes) == 1 and "into a 16.0 MiB redo log" in notes[0], notes
        assert "SET GLOBAL innodb_log_file_size = " in notes[0]
        assert "note: redo: the copy writes about" in cli(*args).stdout  # and the printed plan
    finally:
        sql(spec, f"SET GLOBAL innodb_log_file_size = {size}")
    assert int(sql(spec, "SELECT @@innodb_log_file_size")[0][0][0]) == size
    assert _journals(innotier_home) == journals  # a plan changes nothing
