"""Files the server writes by an absolute path inside its datadir follow a datadir move (``followers``).

One small MariaDB sandbox whose binary log and Aria log are placed by absolute paths inside its datadir
(``log_bin = <datadir>/binlog``, ``aria_log_dir_path = <datadir>``).  A datadir move writes their new values
beside ``datadir``: after the start the server writes its binary logs and Aria log in the target and nothing new
in the old datadir, the proof passes, finalize retires the source, and the way home (and a rollback) put the
original values back.  The control: with nothing but the InnoDB directories followed (the mover before), the server
started on the target removes the old datadir's ``binlog.state`` and writes a new binary log there; the proof is
blocked on the missing file, finalize refuses, and so does rollback (the move is committed).
"""

from __future__ import annotations

import os

import pytest

from tuner.core.errors import MoveError
from tuner.core.server import inspect


def _files(directory: str) -> dict[str, tuple[int, int]]:
    """name -> (size, mtime_ns) of every file under ``directory`` (what a write there would change)."""
    out = {}
    for root, _, names in os.walk(directory):
        for n in names:
            st = os.lstat(os.path.join(root, n))
            out[os.path.relpath(os.path.join(root, n), directory)] = (st.st_size, st.st_mtime_ns)
    return out


def _sql(spec, *statements: str):
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        for s in statements:
            cur.execute(s)
            rows = cur.fetchall() if cur.with_rows else None
        return rows
    finally:
        conn.close()


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _variables(spec) -> dict[str, str]:
    v = inspect(spec).variables
    return {k: v.get(k) for k in ("datadir", "log_bin_basename", "log_bin_index", "aria_log_dir_path")}


def _move(spec, target: str, precopy: bool = False):
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor

    plan = planmod.build(planmod.MoveRequest(component="datadir", target=target, probe=False,
                                                     precopy=precopy), spec)
    return plan, Executor.create(plan)


class _StopHere(Exception):
    """The test's own stop between two states (not an error of the mover's)."""


def _move_plan_only(spec, target: str):
    from datadir_mover.move import plan as planmod

    return planmod.build(planmod.MoveRequest(component="datadir", target=target, probe=False), spec)


def _write_and_rotate(spec) -> None:
    _sql(spec, "INSERT INTO al.t VALUES (NULL, 1)", "FLUSH BINARY LOGS",
                  "CREATE TABLE al.a (id INT PRIMARY KEY) ENGINE=Aria", "DROP TABLE al.a")


def test_which_options_follow_the_datadir_and_which_stay():
    """Given absolute inside the datadir: follows.  Relative, outside, resolved elsewhere, switched off: stays."""
    from datadir_mover.move import followers
    from tuner.core.server import model_from_variables

    dd = "/var/lib/mysql"
    variables = {"version": "11.8.3-MariaDB", "datadir": dd + "/", "log_bin": "ON", "log_bin_basename": f"{dd}/binlog",
                 "slow_query_log_file": f"{dd}/host-slow.log", "general_log_file": f"{dd}/gen.log",
                 "log_error": "/var/log/mysql/error.log", "socket": f"{dd}/mysql.sock", "aria_log_dir_path": dd,
                 "secure_file_priv": f"{dd}/files/", "relay_log_basename": "/srv/relay/relay",
                 "pid_file": "/var/lib/mysql-old/x.pid", "innodb_undo_directory": f"{dd}/undo"}
    configured = {"log_bin": f"{dd}/binlog", "slow_query_log_file": "host-slow.log", "general_log_file": f"{dd}/gen.log",
                  "log_error": "/var/log/mysql/error.log", "aria_log_dir_path": f"{dd}/",
                  "secure_file_priv": f"{dd}/files/", "relay_log": f"{dd}/relay", "pid_file": "/var/lib/mysql-old/x.pid"}
    model = model_from_variables(variables)
    followed = followers.follow(model, configured, dd, "/mnt/t/mysql")
    assert followed == {"log_bin": "/mnt/t/mysql/binlog", "general_log_file": "/mnt/t/mysql/gen.log",
                        "aria_log_dir_path": "/mnt/t/mysql/", "secure_file_priv": "/mnt/t/mysql/files/",
                        "innodb_undo_directory": "/mnt/t/mysql/undo"}
    notes = followers.notes(model, configured, followed, dd)
    assert f"log_bin = {dd}/binlog -> /mnt/t/mysql/binlog (an absolute path inside the datadir: follows it)" in notes
    assert any(n.startswith(f"socket = {dd}/mysql.sock stays") for n in notes)
    off = model_from_variables({**variables, "log_bin": "OFF"})  # given, then skip-log-bin: a line would switch it on
    assert "log_bin" not in followers.follow(off, configured, dd, "/mnt/t/mysql")


def test_a_log_index_is_renamed_into_the_target_line_by_line(tmp_path):
    from datadir_mover.move import log_indexes

    source, target = tmp_path / "dd", tmp_path / "t"
    target.mkdir()
    index = (f"{source}/binlog.000001\n./binlog.000002\n{source}-other/binlog.000003\n{target}/binlog.000004\n"
             f"{source}/binlog.000005\n")
    (target / "binlog.index").write_text(index)
    os.chmod(target / "binlog.index", 0o640)
    assert log_indexes.rewrite(str(target), str(source), ["binlog.index", "gone.index"], 0, 0) == ["binlog.index"]
    assert (target / "binlog.index").read_text() == (
        f"{target}/binlog.000001\n./binlog.000002\n{source}-other/binlog.000003\n{target}/binlog.000004\n"
        f"{target}/binlog.000005\n")
    assert os.stat(target / "binlog.index").st_mode & 0o777 == 0o640
    assert log_indexes.rewrite(str(target), str(source), ["binlog.index"], 0, 0) == []  # again: nothing to do
    assert sorted(os.listdir(target)) == ["binlog.index"]


@pytest.fixture(scope="module")
def box(mv_tiers):
    from tuner.core import sandbox as sbx

    sb = sbx.create("abslogs-mdb", page_size="16k")
    home = str(sb.datadir).rstrip("/")
    # the DBA's own drop-in, read before innotier's placement (50-...): absolute paths inside the datadir
    (sb.conf_d / "30-abslogs.cnf").write_text(
        f"[mysqld]\nlog_bin = {home}/binlog\naria_log_dir_path = {home}\nserver_id = 3\n")
    sb.start()
    spec = sb.connection_spec()
    _sql(spec, "CREATE DATABASE al",
                  "CREATE TABLE al.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB",
                  *[f"INSERT INTO al.t (v) VALUES ({i})" for i in range(50)])
    try:
        yield {"sb": sb, "spec": spec, "home": home, "tiers": mv_tiers, "original": _variables(spec)}
    finally:
        sb.destroy(force=True)


@pytest.mark.root
def test_binlog_and_aria_log_given_inside_the_datadir_follow_it_and_come_home(box):
    spec, home, original = box["spec"], box["home"], box["original"]
    assert original["log_bin_basename"] == f"{home}/binlog" and original["aria_log_dir_path"].rstrip("/") == home
    target = os.path.join(box["tiers"]["tmpfs"], "abslogs-dd")

    plan, ex = _move(spec, target, precopy=True)  # the proof then hashes the stopped source after the start
    assert plan.also_options == {"log_bin": f"{target}/binlog", "aria_log_dir_path": target}, plan.also_options
    assert f"log_bin = {home}/binlog -> {target}/binlog (an absolute path inside the datadir: follows it)" in plan.notes
    assert plan.log_indexes == ["binlog.index"]
    assert f"binlog.index names files by their absolute paths in {home}: those names are renamed into the target in " \
           "its copy at START (the source keeps its own)" in plan.notes
    source_index = _read(f"{home}/binlog.index")
    assert ex.run().phase == "committed"
    assert _read(f"{home}/binlog.index") == source_index  # the source's own, as rollback needs it
    assert _read(f"{target}/binlog.index").startswith(source_index.replace(home + "/", target + "/"))
    moved = _variables(spec)
    assert moved["log_bin_basename"] == f"{target}/binlog" and moved["aria_log_dir_path"].rstrip("/") == target

    # the fault a follower prevents: writes after the start; all of them land in the target
    source_then = _files(home)
    binlogs_then = {n for n in os.listdir(target) if n.startswith("binlog.0")}
    _write_and_rotate(spec)
    assert _files(home) == source_then, "the server wrote in the old datadir"
    assert {n for n in os.listdir(target) if n.startswith("binlog.0")} > binlogs_then
    proof = ex.prove()
    assert proof.status == "passed", proof.text()
    assert not ex.finalize(accept_volatile=True).kept
    assert not os.path.exists(home)

    # the way home undoes the move's options: the DBA's own absolute values are back in force
    plan_home, ex_home = _move(spec, home)
    assert "log_bin" not in (plan_home.placement_after or "") and "aria_log" not in (plan_home.placement_after or "")
    assert ex_home.run().phase == "committed"
    assert _variables(spec) == original
    assert ex_home.prove().status == "passed"
    assert not ex_home.finalize(accept_volatile=True).kept

    # and a rollback (the move stopped after the server started on the target) puts the placement back
    again = os.path.join(box["tiers"]["zram"], "abslogs-dd")
    plan_rb, ex_rb = _move(spec, again)
    assert plan_rb.also_options == {"log_bin": f"{again}/binlog", "aria_log_dir_path": again}
    started = {}

    def stop_after_start(state: str) -> None:
        if state == "VERIFY_SERVER":
            started.update(_variables(spec))
            raise _StopHere(state)

    ex_rb.on_state = stop_after_start
    with pytest.raises(_StopHere):
        ex_rb.run()
    assert started["log_bin_basename"] == f"{again}/binlog"
    ex_rb.rollback(discard_writes_since_start=True)
    assert _variables(spec) == original
    assert not os.path.exists(again) or not os.listdir(again)
    assert _sql(spec, "SELECT COUNT(*) FROM al.t") == [(51,)]


@pytest.mark.root
def test_without_the_followers_the_server_changes_the_old_datadir_and_the_move_is_stuck(box, monkeypatch):
    """The control: the mover as it was (the InnoDB directories only) on the same server."""
    from datadir_mover.move import followers

    monkeypatch.setattr(followers, "FOLLOW", {k: None for k in followers.INNODB_DIRS})
    spec, home = box["spec"], box["home"]
    target = os.path.join(box["tiers"]["tmpfs"], "abslogs-ctl")
    plan, ex = _move(spec, target, precopy=True)
    assert plan.also_options == {}
    assert ex.run().phase == "committed"
    assert _variables(spec)["log_bin_basename"] == f"{home}/binlog"  # still the old datadir's
    source_then = _files(home)
    _write_and_rotate(spec)
    assert _files(home) != source_then  # the server wrote in the source after the start
    # MariaDB read and removed the old datadir's binlog.state at its start (and wrote a new binlog there): the
    # stopped source is no longer what was copied, so the move cannot be finished, nor undone
    proof = ex.prove()
    assert proof.status == "blocked" and f"{home}/binlog.state is missing" in proof.text(), proof.text()
    with pytest.raises(MoveError, match="is blocked: the source cannot be read"):
        ex.finalize(accept_volatile=True)
    with pytest.raises(MoveError, match="is committed.*finalize this move"):  # and finalize refuses: no way out
        ex.rollback(discard_writes_since_start=True)


@pytest.fixture(scope="module")
def mysql_box(installed_server, mv_tiers):
    from tuner.core import sandbox as sbx

    installed_server("mysql-9.7")
    sb = sbx.create("abslogs-my", page_size="16k", server="mysql-9.7",
                    options={"gtid_mode": "ON", "enforce_gtid_consistency": "ON", "server_id": "5"})
    home = str(sb.datadir).rstrip("/")
    (sb.conf_d / "30-abslogs.cnf").write_text(
        f"[mysqld]\nlog_bin = {home}/binlog\nslow_query_log = ON\nslow_query_log_file = {home}/slow.log\n"
        f"relay_log = {home}/relay\n")
    sb.start()
    spec = sb.connection_spec()
    _sql(spec, "CREATE DATABASE al", "CREATE TABLE al.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB",
         *[f"INSERT INTO al.t (v) VALUES ({i})" for i in range(50)], "FLUSH BINARY LOGS")
    try:
        yield {"sb": sb, "spec": spec, "home": home, "tiers": mv_tiers}
    finally:
        sb.destroy(force=True)


@pytest.mark.root
def test_mysql_refuses_a_replica_whose_applier_position_names_a_relay_log_inside_the_datadir(mysql_box):
    """MySQL keeps the applier's relay log name in a table the move cannot rename: refused before anything."""
    spec, home = mysql_box["spec"], mysql_box["home"]
    _sql(spec, "CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT=1, SOURCE_USER='x'")
    target = os.path.join(mysql_box["tiers"]["zram"], "abslogs-my-relay")
    with pytest.raises(MoveError, match=rf"relay_log = {home}/relay is inside the datadir and the replica's applier "
                                        rf"position names its relay logs there \(channel '' at {home}/relay.000001.*"
                                        "STOP REPLICA and RESET REPLICA"):
        _move(spec, target)
    assert not os.path.exists(target)
    _sql(spec, "RESET REPLICA ALL")  # what the refusal says to do: now the move may go
    plan = _move_plan_only(spec, target)
    assert plan.also_options["relay_log"] == f"{target}/relay"


@pytest.mark.root
def test_mysql_binlog_and_slow_log_given_inside_the_datadir_follow_it_and_come_home(mysql_box):
    sb, spec, home = mysql_box["sb"], mysql_box["spec"], mysql_box["home"]
    original = {k: v for k, v in inspect(spec).variables.items() if k in ("log_bin_basename", "slow_query_log_file")}
    assert original == {"log_bin_basename": f"{home}/binlog", "slow_query_log_file": f"{home}/slow.log"}
    target = os.path.join(mysql_box["tiers"]["zram"], "abslogs-my")
    plan, ex = _move(spec, target, precopy=True)
    assert plan.also_options == {"log_bin": f"{target}/binlog", "slow_query_log_file": f"{target}/slow.log",
                                 "relay_log": f"{target}/relay"}
    assert ex.run().phase == "committed"
    source_then = _files(home)
    _sql(spec, "INSERT INTO al.t (v) VALUES (1)", "FLUSH BINARY LOGS", "SELECT SLEEP(0)")
    assert _files(home) == source_then, "the server wrote in the old datadir"
    assert ex.prove().status == "passed"
    assert not ex.finalize(accept_volatile=True).kept and not os.path.exists(home)
    # the index names the binary logs before the move in the target (without the rename MySQL listed the first
    # two with size 0 after this restart: it knew them only by their names in the retired directory)
    from tuner.core.sandbox import Sandbox

    Sandbox.load(sb.name).stop("clean")  # reloaded: the move rewrote sandbox.json
    Sandbox.load(sb.name).start()
    logs = _sql(spec, "SHOW BINARY LOGS")
    assert len(logs) >= 4 and all(size > 0 for _, size, _ in logs), logs
    assert home not in _read(f"{target}/binlog.index")
    plan_home, ex_home = _move(spec, home)
    assert "binlog.index" in plan_home.log_indexes
    assert ex_home.run().phase == "committed"
    assert {k: v for k, v in inspect(spec).variables.items() if k in original} == original
    assert target not in _read(f"{home}/binlog.index")
    assert ex_home.prove().status == "passed" and not ex_home.finalize(accept_volatile=True).kept
    assert _sql(spec, "SELECT COUNT(*) FROM al.t") == [(51,)]


@pytest.mark.root
def test_mysql_without_the_index_rename_knows_the_binary_logs_before_the_move_only_in_the_retired_directory(
        mysql_box, monkeypatch):
    """The control of the rename: the index copied byte for byte names the old datadir's files; after finalize
    MySQL lists them with size 0 (their copies in the target are not the files it knows)."""
    from datadir_mover.move import log_indexes
    from tuner.core.sandbox import Sandbox

    monkeypatch.setattr(log_indexes, "find", lambda model, source: [])
    sb, spec, home = mysql_box["sb"], mysql_box["spec"], mysql_box["home"]
    target = os.path.join(mysql_box["tiers"]["tmpfs"], "abslogs-my-ctl")
    plan, ex = _move(spec, target)
    assert plan.log_indexes == [] and "log_bin" in plan.also_options
    assert ex.run().phase == "committed" and ex.prove().status == "passed"
    assert not ex.finalize(accept_volatile=True).kept
    Sandbox.load(sb.name).stop("clean")
    Sandbox.load(sb.name).start()
    logs = _sql(spec, "SHOW BINARY LOGS")
    lost = [name for name, size, _ in logs if size == 0]
    assert lost and all(os.path.getsize(f"{target}/{name}") > 0 for name in lost), logs
