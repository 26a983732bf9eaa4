"""The mover on real MySQL 9.7: redo (#innodb_redo) and doublewrite files, crash points with resume and rollback.

One MySQL 9.7 sandbox with a TPC-C schema (W=1) for the module.  Redo hops between a real tmpfs and a real
zram-backed ext4 (fresh directory each time); after every move or recovery the table checksums equal the
ones taken before the first move, and the TPC-C consistency checks pass.
"""

from __future__ import annotations

import json
import os

import pytest

import mvhelpers
from tuner.core.server import inspect

CRASH_POINTS = [("COPY:mid", "resume"), ("COPY:mid", "rollback"), ("START:done", "resume"), ("START:done", "rollback")]


@pytest.fixture(scope="module")
def box(server_sandbox, mv_tiers):
    from tuner.tpcc.loader import load

    sb = server_sandbox("mysql-9.7")
    spec = sb.connection_spec()
    load(spec, warehouses=1, database="tpcc", drop=True, progress=False)
    return {"sb": sb, "spec": spec, "before": mvhelpers.checksums(spec), "tiers": mv_tiers, "n": 0}


def _next_target(box, current: str) -> str:
    box["n"] += 1
    tier = "zram" if current.startswith(box["tiers"]["tmpfs"]) else "tmpfs"
    return os.path.join(box["tiers"][tier], f"my97-{box['n']}")


def _same_data(box) -> None:
    assert mvhelpers.checksums(box["spec"]) == box["before"]
    mvhelpers.data_consistent(box["spec"])


@pytest.mark.root
@pytest.mark.slow
def test_move_redo_and_doublewrite(box, cli):
    sb, spec = box["sb"], box["spec"]
    model = inspect(spec)
    redo_to = _next_target(box, model.innodb_log_group_home_dir)
    r = cli("move", "apply", "redo", "--sandbox", sb.name, "--to", redo_to, "--yes", "--json",
            "--verify", "tables")  # tables: CHECKSUM TABLE of everything plus the registered TPC-C check
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verify_server"]["tpcc"] == {"tpcc": "ok"}
    model = inspect(spec)
    assert model.redo_dir == os.path.join(redo_to, "#innodb_redo")
    assert any(n.startswith("#ib_redo") for n in os.listdir(model.redo_dir))
    dblwr_to = _next_target(box, redo_to)
    r = cli("move", "apply", "doublewrite", "--sandbox", sb.name, "--to", dblwr_to, "--yes", "--json")
    assert r.returncode == 0, r.stderr
    model = inspect(spec)
    assert model.innodb_doublewrite_dir == dblwr_to
    assert sorted(os.listdir(dblwr_to)) == ["#ib_16384_0.dblwr", "#ib_16384_1.dblwr"]
    _same_data(box)
    assert mvhelpers.short_workload(spec, seconds=3) > 0
    mvhelpers.data_consistent(spec)
    box["before"] = mvhelpers.checksums(spec)  # the workload changed the data: the new reference


def _open_move_id(sb_name: str) -> str:
    from datadir_mover.move.journal import all_journals

    mine = [j for j in all_journals() if j.plan()["server_key"] == f"sandbox:{sb_name}" and j.phase == "open"]
    assert len(mine) == 1, [j.dir.name for j in mine]
    return mine[0].dir.name


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("point,action", CRASH_POINTS, ids=[f"{p}-{a}" for p, a in CRASH_POINTS])
def test_kill_mover_then_recover_on_mysql(point, action, box, cli):
    sb, spec = box["sb"], box["spec"]
    here = inspect(spec).innodb_log_group_home_dir
    target = _next_target(box, here)
    proc = cli("move", "apply", "redo", "--sandbox", sb.name, "--to", target, "--yes",
               env={"INNOTIER_MOVE_CRASH_AT": point})
    assert proc.returncode == -9, f"the mover was to be killed at {point}:\n{proc.stdout}\n{proc.stderr}"
    move_id = _open_move_id(sb.name)
    after_start = point == "START:done"
    if action == "rollback" and after_start:
        # the server accepted connections on the target: rollback refuses without the explicit flag
        refused = cli("move", "rollback", "--id", move_id, "--yes")
        assert refused.returncode != 0 and "--discard-writes-since-start" in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    r = cli("move", action, "--id", move_id, "--json", *(["--yes"] if action == "rollback" else []),
            *(["--discard-writes-since-start"] if action == "rollback" and after_start else []))
    assert r.returncode == 0, f"{action} after a crash at {point} failed:\n{r.stdout}\n{r.stderr}"
    out = json.loads(r.stdout)
    check = out["verify_server"] if action == "resume" else out["check"]
    assert check["ok"] and check["locations_ok"], check
    if check.get("mode") == "sample" and check.get("tables"):
        # the default verification compared every table's sample (no client writes here: nothing excused)
        assert not check["checksum_problems"] and not check["changed_since_start"], check
    assert sb.state().value == "running"
    expected = target if action == "resume" else here
    assert os.path.realpath(inspect(spec).innodb_log_group_home_dir) == os.path.realpath(expected)
    _same_data(box)


@pytest.mark.root
@pytest.mark.slow
def test_resume_after_verify_refuses_when_mysql_ran_on_the_source(box, cli):
    """Mover killed after VERIFY, MySQL started on the source and written to: `resume` refuses because the
    checkpoint LSN in #innodb_redo moved (read from the #ib_redoN headers, not their stat); no write is lost."""
    from datadir_mover.move.source_fingerprint import redo_checkpoint

    sb, spec = box["sb"], box["spec"]
    here = inspect(spec).innodb_log_group_home_dir
    redo = os.path.join(here, "#innodb_redo")
    killed = cli("move", "apply", "redo", "--sandbox", sb.name, "--to", _next_target(box, here), "--yes",
                 env={"INNOTIER_MOVE_CRASH_AT": "VERIFY:done"})
    assert killed.returncode == -9, killed.stderr
    move_id = _open_move_id(sb.name)
    at_verify = redo_checkpoint(redo)
    assert at_verify, f"no checkpoint LSN read from {sorted(os.listdir(redo))}"

    sb.start()  # the operator brings the server back where it was (SWITCH was not done) and clients write
    assert os.path.realpath(inspect(spec).innodb_log_group_home_dir) == os.path.realpath(here)
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        for sql in ("CREATE DATABASE mvr", "CREATE TABLE mvr.t (id INT PRIMARY KEY) ENGINE=InnoDB",
                    "INSERT INTO mvr.t VALUES (42)"):
            cur.execute(sql)
        conn.commit()
    finally:
        conn.close()
    sb.stop("clean")
    assert redo_checkpoint(redo) > at_verify

    r = cli("move", "resume", "--id", move_id)
    assert r.returncode != 0, r.stdout
    refusal = r.stderr.strip().splitlines()[-1]
    assert refusal.startswith("innotier: the source") and "changed after the copy was verified" in refusal, r.stderr
    assert "checkpoint LSN" in refusal and "#innodb_redo" in refusal and "move rollback" in refusal, refusal

    rb = cli("move", "rollback", "--id", move_id, "--yes")  # what the refusal says to do
    assert rb.returncode == 0, rb.stderr
    assert sb.state().value == "running"
    assert os.path.realpath(inspect(spec).innodb_log_group_home_dir) == os.path.realpath(here)
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT id FROM mvr.t")
        assert cur.fetchall() == [(42,)], "the write made on the source was lost"
        cur.execute("DROP DATABASE mvr")  # the module's reference checksums hold the TPC-C tables only
    finally:
        conn.close()
    _same_data(box)
