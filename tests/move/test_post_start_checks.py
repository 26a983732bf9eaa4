"""The check after the start accepts a table that differs only when it is proven benign; load cannot switch it off.

Real clones of the golden sandbox, real moves to a real tmpfs, real commits waiting on the real
commit block, real damage: a row changed in a data page of the target (page checksum recomputed,
so the server reads it as good data).  The rules themselves (``benign.judge``) are checked on
their own with stated inputs."""

from __future__ import annotations

import os
import threading

import pytest

import mvhelpers

from datadir_mover.move import read_lock, server_check
from datadir_mover.move.server_check import benign, table_sample, waiting_commits
from datadir_mover.move.server_check.benign import Evidence, FileProof
from datadir_mover.move.executor import MoveHalted
from datadir_mover.move.step_records import ShutdownRecord
from tuner.core.errors import MoveError
from waiting import wait_for

MARKER = b"innotier-damage-marker-0001"
DAMAGED = b"innotier-damage-marker-0002"


# ---------------------------------------------------------------------------- the rules, on stated inputs

def _at_stop(*commits: tuple[int, list[str]]) -> waiting_commits.AtStop:
    return waiting_commits.AtStop([waiting_commits.WaitingCommit(i, str(100 + i), 1, n, tables) for i, (n, tables) in enumerate(commits)])


BEFORE = {"a.t": 1, "a.u": 2, "a.v": 3}


def test_a_difference_no_waiting_commit_touched_is_damage():
    v = benign.judge(BEFORE, {"a.t": 9, "a.u": 8, "a.v": 3}, Evidence(_at_stop((1, ["a.t"])), FileProof.READ_BACK))
    assert v.at_stop == ["a.t"] and len(v.problems) == 1 and v.problems[0].startswith("a.u")


def test_missing_or_unreadable_tables_are_never_accepted():
    ev = Evidence(_at_stop((3, ["a.t", "a.u", "a.v"])), FileProof.READ_BACK)
    v = benign.judge(BEFORE, {"a.t": None, "a.u": 2}, ev, written={"a.t", "a.u", "a.v"})
    assert v.problems == ["a.t could not be read (checksum NULL, 1 before)", "a.v is missing"] and not v.at_stop


def test_tables_a_commit_locked_but_the_server_did_not_name_excuse_nothing():
    ev = Evidence(_at_stop((2, ["a.t"])), FileProof.READ_BACK)  # two tables locked, one named
    v = benign.judge(BEFORE, {"a.t": 0, "a.u": 0, "a.v": 0}, ev)
    assert v.at_stop == ["a.t"] and [p.split(":")[0] for p in v.problems] == ["a.u", "a.v"]


def test_only_writes_to_the_table_itself_excuse_it():
    ev = Evidence(waiting_commits.AtStop(), FileProof.READ_BACK)
    assert benign.judge(BEFORE, {"a.t": 0, "a.u": 2, "a.v": 3}, ev, written={"a.t"}).since_start == ["a.t"]
    heartbeat = benign.judge(BEFORE, {"a.t": 0, "a.u": 2, "a.v": 3}, ev, written={"hb.beat", "a.u"})
    assert heartbeat.since_start == [] and [p.split(":")[0] for p in heartbeat.problems] == ["a.t"]
    assert len(benign.judge(BEFORE, {"a.t": 0, "a.u": 2, "a.v": 3}, ev).problems) == 1


def test_without_a_file_proof_nothing_is_accepted_and_a_pending_proof_is_said():
    after = {"a.t": 0, "a.u": 2, "a.v": 3}
    assert len(benign.judge(BEFORE, after, Evidence(_at_stop((1, ["a.t"])), FileProof.NONE), {"a.t"}).problems) == 1
    pending = benign.judge(BEFORE, after, Evidence(_at_stop((1, ["a.t"])), FileProof.PENDING))
    assert pending.at_stop == [] and len(pending.problems) == 1 and pending.pending_proof  # pending is no proof
    unknown = Evidence(waiting_commits.AtStop(known=False), FileProof.READ_BACK)
    assert len(benign.judge(BEFORE, after, unknown).problems) == 1


def test_the_journal_keeps_what_waited_and_an_old_or_failed_record_counts_as_unknown():
    record = _at_stop((2, ["a.t"])).to_journal()
    assert waiting_commits.AtStop.from_journal(record) == _at_stop((2, ["a.t"]))
    assert waiting_commits.AtStop.from_journal({"commits_waiting_at_stop": 1}).count == -1  # no list: written before
    assert waiting_commits.AtStop.from_journal({"commits_waiting_at_stop": -1}).count == -1
    assert waiting_commits.AtStop.from_journal(None).count == 0
    at_stop = ShutdownRecord.from_journal({"stop_began_at": 1.0, **record}).commits_at_stop()
    assert at_stop == _at_stop((2, ["a.t"]))
    assert ShutdownRecord.from_journal({"stop_began_at": 1.0}).commits_at_stop() == waiting_commits.AtStop()
    assert Evidence.of_move(at_stop, precopy=False).file_proof == FileProof.READ_BACK
    assert Evidence.of_move(at_stop, precopy=True).file_proof == FileProof.PENDING
    assert Evidence.of_move(at_stop, precopy=True, proof="passed").file_proof == FileProof.PASSED
    assert Evidence.of_move(at_stop, precopy=True, proof="blocked").file_proof == FileProof.NONE


# ---------------------------------------------------------------------------- real servers

def _sql(spec, *statements):
    return mvhelpers.sql(spec.with_database(None), *statements)


def _schema(spec) -> None:
    _sql(spec, "CREATE DATABASE mvs", "CREATE TABLE mvs.t (id INT PRIMARY KEY) ENGINE=InnoDB",
         "INSERT INTO mvs.t VALUES (1)", "CREATE TABLE mvs.d (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB",
         f"INSERT INTO mvs.d VALUES (1, '{MARKER.decode()}'), (2, 'other')")


def test_only_commits_waiting_on_the_block_are_counted_with_the_tables_they_hold(clone):
    sb = clone("mv-atstop")
    spec = sb.connection_spec()
    _schema(spec)
    holder = spec.with_database(None).connect()
    read_lock.block_writes(holder)
    others = []
    for sql in ("CREATE TABLE mvs.x (id INT PRIMARY KEY)", "SELECT COUNT(*) FROM mvs.d"):
        t = threading.Thread(target=lambda q=sql: _sql(spec, q), daemon=True)  # a DDL waits; a read does not
        t.start()
        others.append(t)
    pending = mvhelpers.PendingCommit(spec, "INSERT INTO mvs.t VALUES (2)")
    seen = pending.start_waiting(spec)
    ddl_waits = wait_for(lambda: _sql(spec, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = "
                                      "'Waiting for backup lock' AND INFO LIKE 'CREATE TABLE%'")[0][0], 20,
                         "the DDL waits on the block")
    assert ddl_waits == 1
    now = waiting_commits.read(holder)
    assert now.count == 1 and now.commits[0].tables == ["mvs.t"] and now.commits[0].tables_locked == 1, now
    assert seen.commits[0].trx == now.commits[0].trx
    holder.close()
    pending.thread.join(20)
    for t in others:
        t.join(20)


def test_a_commit_waiting_at_the_stop_explains_only_its_own_table(clone):
    """The stop may let the waiting commit complete: its table then differs and is put down to it; the same
    difference with no commit waiting is damage."""
    sb = clone("mv-waitstop")
    spec = sb.connection_spec()
    _schema(spec)
    holder = spec.with_database(None).connect()
    read_lock.block_writes(holder)
    before = table_sample.take(holder).digests
    pending = mvhelpers.PendingCommit(spec, "INSERT INTO mvs.t VALUES (2)")
    waiting = pending.start_waiting(spec)
    sb.stop("clean")
    pending.thread.join(20)
    sb.start()
    rows = _sql(spec, "SELECT COUNT(*) FROM mvs.t")[0][0]
    tolerant = server_check.check_server(spec, "datadir", sb.datadir, before, "sample", Evidence(waiting, FileProof.SOURCE))
    strict = server_check.check_server(spec, "datadir", sb.datadir, before, "sample",
                                 Evidence(waiting_commits.AtStop(), FileProof.SOURCE))
    assert tolerant.ok and tolerant.commits_waiting_at_stop == 1 and tolerant.row_writes_since_start == 0
    if rows == 2:  # the waiting commit completed during the shutdown
        assert tolerant.changed_at_stop == ["mvs.t"] and not strict.ok, (pending.outcome, strict.to_dict())
    else:  # it was rolled back: nothing differs
        assert rows == 1 and strict.ok and not tolerant.changed_at_stop, pending.outcome


# ---------------------------------------------------------------------------- real damage on the target

def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = CRC32C[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def damage_row(path: str, page_size: int) -> None:
    """Change the marker row in its data page and give the page a valid full_crc32 checksum again."""
    with open(path, "r+b") as fh:
        data = fh.read()
        at = data.index(MARKER)
        start = at - at % page_size
        page = bytearray(data[start:start + page_size])
        assert int.from_bytes(page[-4:], "big") == crc32c(bytes(page[:-4])), "not a full_crc32 page"
        page[at - start:at - start + len(DAMAGED)] = DAMAGED
        page[-4:] = crc32c(bytes(page[:-4])).to_bytes(4, "big")
        fh.seek(start)
        fh.write(page)
        fh.flush()
        os.fsync(fh.fileno())


def _datadir_move(sb, target: str, on_state, verify_mode: str = "sample"):
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor

    plan = planmod.build(planmod.MoveRequest("datadir", target, probe=False, verify=verify_mode), sb.connection_spec())
    ex = Executor.create(plan)
    if on_state is not None:
        ex.on_state = on_state
    return ex, plan


def _damage_before_start(plan, monkeypatch) -> None:
    """Damage the target after START checked it against the read-back (``target_check``, which would catch it:
    tests/move/test_good_copy.py) and before the server starts: what the check after the start must find."""
    from datadir_mover.move import target_check

    checked = target_check.require_as_verified

    def then_damage(*args, **kwargs):
        out = checked(*args, **kwargs)
        damage_row(os.path.join(plan.target_dir, "mvs", "d.ibd"), int(plan.server["page_size"]))
        return out

    monkeypatch.setattr(target_check, "require_as_verified", then_damage)


@pytest.mark.root
@pytest.mark.parametrize("verify_mode", ["sample", "tables"])
def test_damage_on_the_target_halts_the_move_while_a_commit_waits_at_the_stop(verify_mode, clone, mv_tiers,
                                                                             monkeypatch):
    from datadir_mover.move import shutdown_step

    sb = clone(f"mv-dmg-{verify_mode}")
    spec = sb.connection_spec()
    _schema(spec)
    pending: list[mvhelpers.PendingCommit] = []
    hook = shutdown_step.crash_point

    def at_point(name: str) -> None:  # the commit arrives while the block is held, before the stop
        if name == "SHUTDOWN:mid":
            pending.append(mvhelpers.PendingCommit(spec, "INSERT INTO mvs.t VALUES (2)"))
            pending[0].start_waiting(spec)
        hook(name)

    monkeypatch.setattr(shutdown_step, "crash_point", at_point)
    ex, plan = _datadir_move(sb, os.path.join(mv_tiers["tmpfs"], f"dmg-{verify_mode}"), None, verify_mode)
    _damage_before_start(plan, monkeypatch)
    with pytest.raises(MoveHalted) as halted:
        ex.run()
    assert "mvs.d" in str(halted.value) and "no commit waiting at the stop named it" in str(halted.value)
    at_stop = ShutdownRecord.of(ex.journal).commits_at_stop()
    assert at_stop.count == 1, at_stop
    assert at_stop.commits[0].tables == ["mvs.t"], at_stop
    assert ex.journal.phase == "open"  # halted where it is: nothing rolled back, the operator decides
    assert _sql(spec, "SELECT v FROM mvs.d WHERE id = 1")[0][0] == DAMAGED.decode()  # the server reads the damage


class _PreparedReader(threading.Thread):
    """Read-only prepared statements, reconnecting across the restart (the load a web front end puts on a server)."""

    def __init__(self, spec):
        super().__init__(daemon=True)
        self.spec = spec.with_database(None)
        self.reads = 0
        self.stop = threading.Event()

    def run(self) -> None:
        conn = None
        while not self.stop.is_set():
            try:
                conn = conn or self.spec.connect(connection_timeout=2)
                cur = conn.cursor(prepared=True)
                cur.execute("SELECT v FROM mvs.d WHERE id = ?", (2,))
                cur.fetchall()
                cur.close()
                self.reads += 1
            except Exception:  # noqa: BLE001 - the server is stopped for the move: try again
                conn = None
                self.stop.wait(0.05)


@pytest.mark.root
def test_prepared_reads_during_a_sample_move_do_not_excuse_damage(clone, mv_tiers, monkeypatch):
    sb = clone("mv-dmg-reads")
    spec = sb.connection_spec()
    _schema(spec)
    reader = _PreparedReader(spec)
    reader.start()
    ex, plan = _datadir_move(sb, os.path.join(mv_tiers["tmpfs"], "dmg-reads"), None)
    _damage_before_start(plan, monkeypatch)

    def on_state(state: str) -> None:
        if state == "VERIFY_SERVER":  # the started server has served prepared reads before the check
            n = reader.reads
            wait_for(lambda: reader.reads >= n + 20, 30, "prepared reads on the started server")

    ex.on_state = on_state
    try:
        with pytest.raises(MoveError) as halted:
            ex.run()
    finally:
        reader.stop.set()
        reader.join(10)
    assert isinstance(halted.value, MoveHalted) and "mvs.d" in str(halted.value), halted.value
    status = dict(_sql(spec, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_stmt_execute', 'Handler_write', "
                             "'Handler_update', 'Handler_delete')"))
    assert int(status["Com_stmt_execute"]) >= 20, status  # the statements the old rule counted as writes
    assert sum(int(status[k]) for k in ("Handler_write", "Handler_update", "Handler_delete")) == 0, status


def test_byte_identical_is_printed_only_where_it_was_proven():
    from datadir_mover.move_cli import proof_words

    assert proof_words("read back") == "the copied files are byte-identical"
    assert proof_words("pending") == "file proof pending (innotier move status)"
    assert proof_words("pending", whole_proof="passed").endswith("identical")
    assert "identical" not in proof_words("none")
