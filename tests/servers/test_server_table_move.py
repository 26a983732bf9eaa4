"""Table moves on real MySQL 9.7: an unregistered root refused, register-root (one restart), a move into a
general tablespace on a real tmpfs and back while a writer keeps inserting, and a table that left its tier
by hand reported by status.

The writer inserts every row into the moving table and into a reference table in one transaction, so
after it stops CHECKSUM TABLE of the two must be equal: a row lost or changed by the move would show.
"""

from __future__ import annotations

import json
import os
import threading

import pytest

from tuner.core.sandbox import Sandbox

ROWS = 200


class Writer(threading.Thread):
    """Inserts into tm.t and tm.ref in one transaction per row until stopped; counts errors."""

    def __init__(self, spec):
        super().__init__(daemon=True)
        self.spec, self.halt, self.errors, self.next_id = spec, threading.Event(), [], ROWS + 1
        self.progress = threading.Condition()

    def run(self) -> None:
        conn = self.spec.with_database("tm").connect()
        cur = conn.cursor()
        while not self.halt.is_set():
            try:
                cur.execute("START TRANSACTION")
                for table in ("t", "ref"):
                    cur.execute(f"INSERT INTO {table} VALUES (%s, REPEAT('w', 50))", (self.next_id,))
                cur.execute("COMMIT")
                with self.progress:
                    self.next_id += 1
                    self.progress.notify_all()
            except Exception as exc:  # any error is a failed transaction: the move must cause none
                self.errors.append(str(exc))
                cur.execute("ROLLBACK")
        conn.close()

    def wait_rows(self, n: int = 20) -> None:
        with self.progress:
            target = self.next_id + n
            assert self.progress.wait_for(lambda: self.next_id >= target or self.errors, timeout=60), "writer stalled"


def _sql(spec, *statements):
    conn = spec.with_database(None).connect()
    cur, out = conn.cursor(), []
    for s in statements:
        cur.execute(s)
        out.append(cur.fetchall() if cur.with_rows else None)
    conn.close()
    return out


def _file(spec) -> tuple[str, str]:
    return tuple(_sql(spec, "SELECT ts.NAME, f.FILE_NAME FROM information_schema.INNODB_TABLES t JOIN "
                            "information_schema.FILES f ON f.FILE_ID = t.SPACE JOIN information_schema.INNODB_TABLESPACES "
                            "ts ON ts.SPACE = t.SPACE WHERE t.NAME = 'tm/t'")[0][0])


@pytest.mark.root
def test_register_root_then_move_and_back_online(server_sandbox, mv_tiers, cli):
    sb: Sandbox = server_sandbox("mysql-9.7")
    spec = sb.connection_spec()
    root = os.path.join(mv_tiers["tmpfs"], "tm-my97")
    os.makedirs(root, exist_ok=True)
    _sql(spec, "CREATE DATABASE tm", "CREATE TABLE tm.t (id INT PRIMARY KEY, v VARCHAR(60))",
         "CREATE TABLE tm.ref LIKE tm.t",
         "INSERT INTO tm.t VALUES " + ", ".join(f"({n}, 'row {n}')" for n in range(1, ROWS + 1)),
         "INSERT INTO tm.ref SELECT * FROM tm.t")
    args = ["tm.t", "--to", root, "--sandbox", sb.name, "--i-accept-volatile", "--yes"]

    r = cli("table-move", "apply", *args)  # not registered: one line naming register-root, nothing changed
    assert r.returncode == 7 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"innotier table-move register-root {root} --sandbox {sb.name}" in r.stderr and "3121" in r.stderr
    assert _file(spec)[1] == "./tm/t.ibd" and os.listdir(root) == []
    r = cli("table-move", "apply", *args, "--pace", "0.1")  # MariaDB's copier only: one line, nothing changed
    assert r.returncode == 7 and len(r.stderr.strip().splitlines()) == 1 and "--pace paces MariaDB's" in r.stderr
    assert _file(spec)[1] == "./tm/t.ibd" and os.listdir(root) == []

    r = cli("table-move", "register-root", root, "--sandbox", sb.name, "--yes", "--json")
    assert r.returncode == 0, r.stderr
    assert root in json.loads(r.stdout)["innodb_directories"]

    writer = Writer(spec)
    writer.start()
    try:
        writer.wait_rows()
        r = cli("table-move", "apply", *args, "--json")
        assert r.returncode == 0, r.stderr
        assert _file(spec) == ("innotier_tm_t", os.path.join(root, "innotier_tm_t.ibd"))
        assert os.path.isfile(os.path.join(root, "innotier_tm_t.ibd"))
        writer.wait_rows()  # inserts go on into the table on the tier
        r = cli("table-move", "back", "tm.t", "--yes", "--json")
        assert r.returncode == 0, r.stderr
        writer.wait_rows()
    finally:
        writer.halt.set()
        writer.join(timeout=60)
    assert writer.errors == []
    assert _file(spec) == ("tm/t", "./tm/t.ibd") and os.listdir(root) == []
    assert _sql(spec, "SELECT COUNT(*) FROM information_schema.INNODB_TABLESPACES WHERE NAME LIKE 'innotier%'")[0][0][0] == 0
    t, ref = (_sql(spec, f"CHECKSUM TABLE tm.{x}")[0][0][1] for x in ("t", "ref"))
    assert t == ref


@pytest.mark.root
def test_status_reports_a_table_that_left_its_tier(server_sandbox, mv_tiers, cli):
    sb = server_sandbox("mysql-9.7")
    spec = sb.connection_spec()
    root = os.path.join(mv_tiers["tmpfs"], "tm-my97")  # registered by the test above
    r = cli("table-move", "apply", "tm.ref", "--to", root, "--sandbox", sb.name, "--i-accept-volatile", "--yes")
    assert r.returncode == 0, r.stderr
    assert cli("table-move", "status").returncode == 0
    _sql(spec, "ALTER TABLE tm.ref TABLESPACE=innodb_file_per_table")  # by hand, behind innotier's back
    r = cli("table-move", "status")
    assert r.returncode == 1
    assert "tm.ref is no longer where move" in r.stdout and "tm/ref.ibd" in r.stdout
