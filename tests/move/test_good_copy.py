"""Recovery keeps one good copy: faults injected into real moves (real `innotier` processes, real tmpfs, real files).

One clone serves each group of faults, in order, so the whole file costs a few moves:

- the issue's transcript: a datadir move onto tmpfs killed right after VERIFY, then the
  source removed (a RAM tier after a reboot): rollback refuses in one line naming the target
  and `move resume`, and removes nothing; resume carries the move onto the verified target;
- the target taken away after VERIFY: SWITCH refuses instead of making an empty one;
- a byte flipped in a target file between its read-back and a resumed START (with a torn last
  journal line on top): the start refuses, the server never runs on it, rollback goes back;
- the source taken away after START of a pre-copied move: the proof is blocked (not failed)
  and says why, rollback refuses (the target is the good copy), and once the source is back
  the proof runs and passes;
- a server started by hand on the source after VERIFY of an undo move, then of an ibdata move, whose
  redo log lives in a third directory: resume refuses, the offline proof is invalidated, rollback keeps
  the row;
- two applies of one server at once: the second refuses in one line naming the first;
- a heartbeat row written on the target and damage in another table: the damage is not excused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import mvhelpers


def _open_move(name: str):
    from datadir_mover.move.journal import all_journals

    mine = [j for j in all_journals() if j.plan()["server_key"] == f"sandbox:{name}" and j.phase == "open"]
    assert len(mine) == 1, [j.dir.name for j in mine]
    return mine[0]


def _datadir(spec) -> str:
    from tuner.core.server import inspect

    return os.path.realpath(inspect(spec).datadir)


def _last_line(proc) -> str:
    return proc.stderr.strip().splitlines()[-1]


def _flip_byte(path: str, offset: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([b[0] ^ 0xFF]))
        fh.flush()
        os.fsync(fh.fileno())


@pytest.mark.root
def test_rollback_and_resume_keep_the_good_copy(clone, mv_tiers, cli):
    from datadir_mover.move.step_records import VerifyServerRecord

    sb = clone("rc-good")
    spec = sb.connection_spec()
    before = mvhelpers.checksums(spec)
    home = _datadir(spec)

    # two applies at once: the second refuses in one line naming the move at work, and changes nothing
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from datadir_mover.move.server_lock import "
                               "ServerLock; held = ServerLock(sys.argv[1]).acquire('m-first'); print('held', flush=True); "
                               "sys.stdin.read()", f"sandbox:{sb.name}"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = cli("move", "apply", "datadir", "--sandbox", sb.name, "--to",
                     os.path.join(mv_tiers["tmpfs"], "rc-two"), "--yes")
        assert second.returncode != 0 and len(second.stderr.strip().splitlines()) == 1, second.stderr
        assert "move m-first of sandbox:rc-good is at work" in second.stderr, second.stderr
        assert not os.path.exists(os.path.join(mv_tiers["tmpfs"], "rc-two")) and _datadir(spec) == home
    finally:
        holder.stdin.close()
        holder.wait(10)

    # the target taken away after VERIFY (a tier that did not come back): SWITCH refuses instead of making it anew
    target = os.path.join(mv_tiers["tmpfs"], "rc-vanish")
    killed = cli("move", "apply", "datadir", "--sandbox", sb.name, "--to", target, "--yes",
                 env={"INNOTIER_MOVE_CRASH_AT": "VERIFY:done"})
    assert killed.returncode == -9, killed.stderr
    journal = _open_move(sb.name)
    shutil.rmtree(target)
    r = cli("move", "resume", "--id", journal.dir.name)
    assert r.returncode != 0 and "vanished after the copy was verified" in _last_line(r), r.stderr
    assert not os.path.exists(target) and not journal.done("SWITCH")
    r = cli("move", "rollback", "--id", journal.dir.name, "--yes")
    assert r.returncode == 0, r.stderr
    assert _datadir(spec) == home and mvhelpers.checksums(spec) == before

    # a byte flipped in a target file after VERIFY read it back, and a torn last journal line: START refuses
    target = os.path.join(mv_tiers["tmpfs"], "rc-flip")
    killed = cli("move", "apply", "datadir", "--sandbox", sb.name, "--to", target, "--yes",
                 env={"INNOTIER_MOVE_CRASH_AT": "VERIFY:done"})
    assert killed.returncode == -9, killed.stderr
    journal = _open_move(sb.name)
    _flip_byte(os.path.join(target, "tpcc", "warehouse.ibd"), 16384 * 3 + 200)
    with open(journal.path, "a") as fh:
        fh.write('{"at": 1.0, "event": "begin", "sta')  # a record a crash tore
    r = cli("move", "resume", "--id", journal.dir.name)
    assert r.returncode != 0 and "torn by a crash" in r.stderr, r.stderr
    refusal = _last_line(r)
    assert "the target" in refusal and "changed after the copy was verified" in refusal, refusal
    assert "tpcc/warehouse.ibd (content changed" in refusal and "move rollback" in refusal, refusal
    assert journal.began("SWITCH") and not journal.done("START") and sb.running_pid() is None
    r = cli("move", "rollback", "--id", journal.dir.name, "--yes")
    assert r.returncode == 0, r.stderr  # it starts the server on the source again (it was running) and checks it
    assert _datadir(spec) == home and mvhelpers.checksums(spec) == before
    assert not os.path.exists(target)

    # the transcript: killed after VERIFY, the source removed; rollback must not remove the only copy
    target = os.path.join(mv_tiers["tmpfs"], "rc-gone")
    killed = cli("move", "apply", "datadir", "--sandbox", sb.name, "--to", target, "--yes",
                 env={"INNOTIER_MOVE_CRASH_AT": "VERIFY:done"})
    assert killed.returncode == -9, killed.stderr
    journal = _open_move(sb.name)
    source = journal.plan()["source_dir"]
    shutil.rmtree(source)
    r = cli("move", "rollback", "--id", journal.dir.name, "--yes")
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"the source {source} is gone" in r.stderr and f"the target {target}" in r.stderr, r.stderr
    assert f"innotier move resume --id {journal.dir.name}" in r.stderr, r.stderr
    assert os.path.isfile(os.path.join(target, "tpcc", "warehouse.ibd")) and not journal.began("ROLLBACK")
    r = cli("move", "resume", "--id", journal.dir.name)
    assert r.returncode == 0, r.stderr
    assert "the verified copy on" in r.stderr and "carrying the move forward" in r.stderr, r.stderr
    assert journal.phase == "committed" and VerifyServerRecord.of(journal).ok
    assert _datadir(spec) == os.path.realpath(target) and mvhelpers.checksums(spec) == before

    # a torn line at SWITCH (end to end): killed halfway through SWITCH (the placement already points at the
    # target), SWITCH's begin record written onto the end of a line a crash tore (as an older innotier appended) and
    # the record after it torn: rollback still sees SWITCH begun and puts the placement back
    home, target = target, os.path.join(mv_tiers["zram"], "rc-switch")
    journal = _killed_and_torn(cli, sb.name, target, "SWITCH:mid", "SWITCH")
    r = cli("move", "rollback", "--id", journal.dir.name, "--yes")
    assert r.returncode == 0 and "torn by a crash" in r.stderr, r.stderr
    assert journal.phase == "rolled_back" and not os.path.exists(target)
    assert _datadir(spec) == os.path.realpath(home) and mvhelpers.checksums(spec) == before

    # the same at SWITCH, then resumed; then finalize killed after its first removal, its begin record glued to a
    # torn line: rollback refuses (committed), a second finalize carries on where the first stopped
    target = os.path.join(mv_tiers["zram"], "rc-final")
    journal = _killed_and_torn(cli, sb.name, target, "SWITCH:mid", "SWITCH")
    r = cli("move", "resume", "--id", journal.dir.name)
    assert r.returncode == 0 and "torn by a crash" in r.stderr, r.stderr
    assert journal.phase == "committed" and _datadir(spec) == os.path.realpath(target)
    killed = cli("move", "finalize", "--id", journal.dir.name, "--yes", "--i-accept-volatile",
                 env={"INNOTIER_MOVE_CRASH_AT": "FINALIZE:mid"})
    assert killed.returncode == -9, killed.stderr
    files = [r["rel"] for r in journal.load_json("copy-manifest.json")["records"] if r["kind"] == "file"]
    left = [rel for rel in files if os.path.lexists(os.path.join(home, rel))]
    assert 0 < len(left) < len(files), left  # it removed some of the source's files, not all
    _tear(journal, "FINALIZE")
    shown = cli("move", "status", "--id", journal.dir.name)
    assert "finalize was interrupted: run `innotier move finalize` again" in shown.stdout, shown.stdout
    r = cli("move", "rollback", "--id", journal.dir.name, "--yes")
    assert r.returncode != 0 and "is committed" in _last_line(r), r.stderr  # it refuses before appending
    assert [rel for rel in files if os.path.lexists(os.path.join(home, rel))] == left
    r = cli("move", "finalize", "--id", journal.dir.name, "--yes", "--i-accept-volatile")
    assert r.returncode == 0 and "torn by a crash" in r.stderr, r.stderr
    assert journal.phase == "finalized" and not os.path.exists(os.path.join(home, "tpcc"))
    assert _datadir(spec) == os.path.realpath(target) and mvhelpers.checksums(spec) == before


def _tear(journal, state: str) -> None:
    """``state``'s begin record (the journal's last) written onto the end of a torn line, as an older innotier
    appended after a crash, and a torn record after it."""
    lines = journal.path.read_text().splitlines(keepends=True)
    last = json.loads(lines[-1])
    assert (last["state"], last["event"]) == (state, "begin"), lines[-1]
    lines[-1] = '{"at": 1.0, "event": "do' + lines[-1]
    journal.path.write_text("".join(lines) + '{"at": 2.0, "sta')


def _killed_and_torn(cli, name: str, target: str, crash_at: str, state: str):
    killed = cli("move", "apply", "datadir", "--sandbox", name, "--to", target, "--yes",
                 env={"INNOTIER_MOVE_CRASH_AT": crash_at})
    assert killed.returncode == -9, killed.stderr
    journal = _open_move(name)
    _tear(journal, state)
    return journal


@pytest.mark.root
def test_a_source_taken_away_after_start_blocks_the_proof_until_it_is_back(clone, mv_tiers, cli):
    from datadir_mover.move.proof import Proof

    sb = clone("rc-blocked")
    spec = sb.connection_spec()
    target = os.path.join(mv_tiers["tmpfs"], "rc-blocked")
    killed = cli("move", "apply", "datadir", "--sandbox", sb.name, "--to", target, "--precopy", "--yes",
                 env={"INNOTIER_MOVE_CRASH_AT": "START:done"})
    assert killed.returncode == -9, killed.stderr
    journal = _open_move(sb.name)
    home = journal.plan()["source_dir"]
    away = home + ".away"
    os.rename(home, away)  # the source's tier did not come back
    try:
        r = cli("move", "verify", "--id", journal.dir.name)
        assert r.returncode == 1 and "proof blocked: the source cannot be read" in r.stdout, r.stdout + r.stderr
        assert f"{home} is missing" in r.stdout and "runs again when the source is back" in r.stdout, r.stdout
        proof = Proof.load(journal)
        assert proof.status == "blocked" and not proof.mismatches
        r = cli("move", "rollback", "--id", journal.dir.name, "--yes", "--discard-writes-since-start")
        assert r.returncode != 0 and f"the source {home} is gone" in r.stderr, r.stderr
        assert "the server runs on the target" in r.stderr and "move resume" in r.stderr, r.stderr
        assert _datadir(spec) == os.path.realpath(target)
    finally:
        os.rename(away, home)
    _writers_of_proof_json_take_turns_with_a_running_prover(journal)
    r = cli("move", "verify", "--id", journal.dir.name)
    assert r.returncode == 0 and "proof passed" in r.stdout, r.stdout + r.stderr
    r = cli("move", "resume", "--id", journal.dir.name, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["phase"] == "committed", r.stderr


def _prover(journal, rate: int) -> subprocess.Popen:
    """A real prover, as ``proof.start_background`` starts it (this one's pid is kept, to kill it like a crash)."""
    return subprocess.Popen([sys.executable, "-m", "datadir_mover.move.proof", str(journal.dir), str(rate)],
                            stdin=subprocess.DEVNULL, start_new_session=True)


def _kill(prover: subprocess.Popen) -> None:
    prover.kill()
    prover.wait(10)


def _writers_of_proof_json_take_turns_with_a_running_prover(journal) -> None:
    """``record_at_switch`` and ``invalidate`` write ``proof.json`` under ``proof.lock``: while a real prover holds
    it they wait, so the file ends as one whole state and an invalidation is never lost.  The control, the same
    calls without the lock (the prover still takes it), shows what the lock prevents: the prover's next save puts
    back the files it compared before the switch (a mix of two runs) and undoes the invalidation."""
    import threading

    from datadir_mover.move import proof as proofmod
    from datadir_mover.move import side_files
    from datadir_mover.move.copy import Manifest, file_blocks
    from datadir_mover.move.plan import Plan
    from tuner.core.filelock import try_lock
    from waiting import wait_for

    plan = Plan.from_dict(journal.plan())
    manifest = Manifest.from_dict(journal.load_json(side_files.COPY_MANIFEST))
    as_switch_left_them = {name: journal.load_json(name) for name in (
        side_files.PROOF, side_files.TARGET_BLOCKS, side_files.TARGET_LIST, side_files.TARGET_LINKS)}
    rate = max(manifest.bytes // 3, 1 << 20)  # a whole run takes about 3 s: it is at work while the writers come
    files = sorted(rel for rel, rec in manifest.records.items() if rec.kind == "file")
    done = lambda: proofmod.Proof.load(journal).done  # noqa: E731
    status = lambda: proofmod.Proof.load(journal).status  # noqa: E731

    def held() -> bool:  # proof.lock is held (by the prover)
        fd = try_lock(journal.dir / side_files.PROOF_LOCK)
        if fd is not None:
            os.close(fd)
        return fd is None

    def at_work(prover) -> list[str]:
        """The prover holds the lock and saved progress: what it has compared so far."""
        wait_for(lambda: done() and held(), 60, "the prover saving its progress")
        assert prover.poll() is None
        return list(done())

    def behind(prover, write) -> threading.Thread:
        """``write`` in a thread while the prover works: it waits for the lock, the prover going on meanwhile."""
        seen = at_work(prover)
        writer = threading.Thread(target=write)
        writer.start()
        wait_for(lambda: len(done()) > len(seen), 60, "the prover going on while the writer waits")
        assert writer.is_alive(), "the writer did not wait for the prover's lock"
        return writer

    # with the lock: the switch's record waits for the prover to finish, then the proof starts over, whole,
    # against the target as it is (the prover's last save does not come after it)
    prover = _prover(journal, rate)
    writer = behind(prover, lambda: proofmod.record_at_switch(journal, plan, manifest))
    assert prover.wait(60) == 0
    writer.join(60)
    fresh = proofmod.Proof.load(journal)
    assert (fresh.status, fresh.done, fresh.bytes_done, fresh.mismatches) == ("pending", [], 0, []), fresh
    blocks = journal.load_json(side_files.TARGET_BLOCKS)
    item = "tpcc/item.ibd"  # TPC-C never writes ITEM: the server on the target leaves it as it was
    assert sorted(blocks) == files and blocks[item] == file_blocks(os.path.join(plan.target_dir, item)).hex()
    # with the lock: an invalidation waits for the prover (killed mid-run here) and stays
    prover = _prover(journal, rate)
    writer = behind(prover, lambda: proofmod.invalidate(journal, "a server ran on it"))
    _kill(prover)
    writer.join(60)
    kept = proofmod.Proof.load(journal)
    assert kept.status == "failed" and kept.mismatches[-1].file == "(the source)", kept
    assert proofmod.run(journal).status == "failed"  # a failed proof never runs again

    # the control: the same writers without the lock (the prover still takes it)
    proofmod.record_at_switch(journal, plan, manifest)
    real_lock = proofmod._lock
    proofmod._lock = lambda journal, wait: os.open(os.devnull, os.O_RDONLY)
    try:
        prover = _prover(journal, rate)
        before_switch = at_work(prover)
        proofmod.record_at_switch(journal, plan, manifest)
        mixed = wait_for(lambda: len(done()) > len(before_switch) and done(), 60, "the prover's next save")
        assert mixed[:len(before_switch)] == before_switch, mixed  # compared before the switch, kept: a mix
        _kill(prover)
        proofmod.record_at_switch(journal, plan, manifest)
        prover = _prover(journal, rate)
        at_work(prover)
        proofmod.invalidate(journal, "a server ran on it")
        wait_for(lambda: status() != "failed", 60, "the prover's next save")  # the invalidation lost
        _kill(prover)
    finally:
        proofmod._lock = real_lock
    for name, saved in as_switch_left_them.items():  # the server runs on the target: put back what SWITCH recorded
        journal.save_json(name, saved)


def _said(field: str) -> str:
    return field.replace("_", " ").replace("lsn", "LSN")


def _lsn_offsets(field: str) -> tuple[int, ...]:
    from datadir_mover.move.copy.redo import REDO_CHECKPOINTS
    from datadir_mover.move.source_fingerprint import FIL_PAGE_FILE_FLUSH_LSN, FIL_PAGE_LSN

    return {"checkpoint_lsn": REDO_CHECKPOINTS, "page_lsn": (FIL_PAGE_LSN,),
            "flush_lsn": (FIL_PAGE_FILE_FLUSH_LSN,)}[field]


def _write_lsn(path: str, field: str, value: int | dict) -> dict:
    """Write ``value`` (or put back the bytes ``value`` maps) at ``field``'s offsets, its mtime kept as it was (a
    change in that field alone: only its ctime moves with it); the bytes that were there."""
    st = os.stat(path)
    was = {}
    fd = os.open(path, os.O_RDWR)
    try:
        for off in _lsn_offsets(field):
            was[off] = os.pread(fd, 8, off)
            os.pwrite(fd, value[off] if isinstance(value, dict) else value.to_bytes(8, "big"), off)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return was


def _each_fingerprint_field_alone_is_caught_and_named(journal) -> list[tuple[str, str, str]]:
    """Every LSN the fingerprint took at VERIFY, moved alone on the stopped source's real files (forward: a server
    ran on it; back: an older copy restored), then put back: the re-check resume and rollback run names the file and
    the field each time.  (role, path, field) of each field shown."""
    from datadir_mover.move import good_copy, source_fingerprint
    from datadir_mover.move.plan import Plan
    from datadir_mover.move.source_fingerprint import LSN_KEYS, SourceState

    plan = Plan.from_dict(journal.plan())
    then = journal.load_json("source-fingerprint.json")
    dumps = [p for role in ("moved", "shared") for p in then[role] if os.path.basename(p) == "ib_buffer_pool"]
    assert dumps and not any(set(LSN_KEYS) & set(then[r].get(p, {})) for r in ("moved", "shared") for p in dumps)
    legacy = json.loads(json.dumps(then))  # as an older innotier took it: the dump's digits read as LSNs
    for role in ("moved", "shared"):
        for p in dumps:
            legacy[role].get(p, {}).update(page_lsn=3749872501722919690, flush_lsn=3617289945198899763)
    assert source_fingerprint.classify(legacy, source_fingerprint.take(plan)) == (SourceState.SAME, "")
    shown = []
    for role in ("moved", "shared"):
        for path, facts in sorted(then[role].items()):
            real = path if role == "shared" else os.path.join(plan.source_dir, path)
            for field in (k for k in LSN_KEYS if k in facts):
                was = facts[field]  # ibdata's flush LSN is 0 on MariaDB 10.8+ (it no longer writes it): no way back
                for value, state, how in ((was + 4096, SourceState.AHEAD, "moved"),
                                          (was - 1, SourceState.DAMAGED, "went back"))[:2 if was else 1]:
                    old = _write_lsn(real, field, value)
                    try:
                        found = good_copy.check_source(journal, plan)
                    finally:
                        _write_lsn(real, field, old)
                    assert found.state == state, (path, field, found)
                    assert found.why.startswith(f"{path}: its {_said(field)} {how} from {was} to {value}"), found
                shown.append((role, path, field))
    return shown


def _lsns_moved(journal) -> list[tuple[str, str, int, int]]:
    """(path, field, at VERIFY, now) of every fingerprinted LSN that is not what it was at VERIFY."""
    from datadir_mover.move import source_fingerprint
    from datadir_mover.move.plan import Plan

    then = journal.load_json("source-fingerprint.json")
    now = source_fingerprint.take(Plan.from_dict(journal.plan()))
    return [(path, k, was[k], now[role][path].get(k)) for role in ("moved", "shared")
            for path, was in sorted(then[role].items()) for k in source_fingerprint.LSN_KEYS
            if k in was and path in now[role] and now[role][path].get(k) != was[k]]


@pytest.mark.root
def test_a_server_started_by_hand_on_the_source_of_an_undo_or_ibdata_move_is_caught(clone, mv_tiers, cli):
    from datadir_mover.move.proof import Proof

    sb = clone("rc-undo")
    spec = sb.connection_spec()
    redo_dir = os.path.join(mv_tiers["zram"], "rc-undo-redo")  # the redo log in a third directory
    r = cli("move", "apply", "redo", "--sandbox", sb.name, "--to", redo_dir, "--yes")
    assert r.returncode == 0, r.stderr
    for component in ("undo", "ibdata"):
        target = os.path.join(mv_tiers["tmpfs"], f"rc-{component}")
        killed = cli("move", "apply", component, "--sandbox", sb.name, "--to", target, "--yes",
                     env={"INNOTIER_MOVE_CRASH_AT": "VERIFY:done"})
        assert killed.returncode == -9, killed.stderr
        journal = _open_move(sb.name)
        assert Proof.load(journal).status == "passed"  # the offline path's proof, recorded at VERIFY
        caught = _each_fingerprint_field_alone_is_caught_and_named(journal)
        assert {(role, field) for role, _, field in caught} >= {
            ("moved", "page_lsn"), ("shared", "checkpoint_lsn"), ("shared", "page_lsn")}, caught
        assert ("moved" if component == "ibdata" else "shared", "flush_lsn") in {(r, f) for r, _, f in caught}
        sb.start()  # by hand, on the old placement: the moved files in the datadir take the writes
        mvhelpers.sql(spec.with_database(None), f"CREATE DATABASE rc_{component}",
                      f"CREATE TABLE rc_{component}.t (id INT PRIMARY KEY)", f"INSERT INTO rc_{component}.t VALUES (7)")
        sb.stop("clean")
        r = cli("move", "resume", "--id", journal.dir.name)
        assert r.returncode != 0, r.stdout
        refusal = _last_line(r)
        assert "changed after the copy was verified" in refusal and "move rollback" in refusal, refusal
        moved = _lsns_moved(journal)  # what the real run moved: the line names the file and the field of one
        assert moved and any(f"{path}: its {_said(field)} moved from {was} to {now}" in refusal
                             for path, field, was, now in moved), (refusal, moved)
        assert not journal.done("SWITCH")
        assert Proof.load(journal).status == "failed"  # a source that moved on invalidates the recorded proof
        r = cli("move", "rollback", "--id", journal.dir.name, "--yes")
        assert r.returncode == 0, r.stderr  # the source moved on: it is the newest copy, rollback returns to it
        assert mvhelpers.sql(spec.with_database(None), f"SELECT id FROM rc_{component}.t") == [(7,)]


@pytest.mark.root
def test_a_heartbeat_row_does_not_excuse_damage_in_another_table(clone):
    from datadir_mover.move import server_check
    from datadir_mover.move.server_check import table_sample, waiting_commits
    from datadir_mover.move.server_check.benign import Evidence, FileProof
    from test_post_start_checks import MARKER, damage_row

    sb = clone("rc-heartbeat")
    spec = sb.connection_spec()
    mvhelpers.sql(spec.with_database(None), "CREATE DATABASE hb",
                  "CREATE TABLE hb.beat (id INT PRIMARY KEY, at INT) ENGINE=InnoDB", "INSERT INTO hb.beat VALUES (1, 0)",
                  "CREATE TABLE hb.d (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB",
                  f"INSERT INTO hb.d VALUES (1, '{MARKER.decode()}')")
    conn = spec.with_database(None).connect()
    before = table_sample.take(conn).digests
    conn.close()
    sb.stop("clean")
    damage_row(os.path.join(sb.datadir, "hb", "d.ibd"), 16384)
    sb.start()
    mvhelpers.sql(spec.with_database(None), "UPDATE hb.beat SET at = at + 1 WHERE id = 1")  # the heartbeat
    check = server_check.check_server(spec, "datadir", sb.datadir, before, "sample",
                                Evidence(waiting_commits.AtStop(), FileProof.READ_BACK))
    assert check.changed_since_start == ["hb.beat"], check.to_dict()
    assert [p.split(":")[0] for p in check.checksum_problems] == ["hb.d"], check.to_dict()
    assert not check.ok
