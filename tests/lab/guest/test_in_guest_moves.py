"""Inside the lab VM: relocations onto a DAX ext4 (NVDIMM fsdax) and onto md RAID 10, with TPC-C W=1.

Lean for emulation (every byte copied and every CLI start costs seconds under TCG), yet every path runs:

- the whole datadir onto /mnt/pmem (real `mount -o dax`): the mover is SIGKILLed in the middle of the copy
  (INNOTIER_MOVE_CRASH_AT=COPY:mid) and `move resume` finishes it; the moved files carry statx DAX, every
  table's checksum equals the value from before, a short TPC-C run and the consistency checks pass;
- `persist` on that DAX tier: install (units verified) with a first consistent copy, commits after it,
  the server killed and the DAX file system lost (made anew), `persist restore`: exactly the synced state;
- the redo log onto /mnt/r10 (RAID 10 near=2 over four virtio disks): SIGKILL mid-copy and `move rollback`
  (the redo back where it was, checksums equal), then the move again to its end and TPC-C run + check;
- a wrapped redo log mapped by MariaDB on the DAX mount (``MAP_SYNC``: its stores change neither mtime nor ctime)
  moved off it with ``--precopy`` while a client commits: at the switch the target's log equals the source's, the
  proof passes, no acknowledged row is lost; its negative control (the content rule for redo replaced by the stat
  rule) keeps a stale log and the proof names ib_logfile0;
- `tiers bench` on both tiers and the DCPMM-paper lint on the DAX mount.

One loaded W=1 datadir serves every test: the sweep's golden copy (tuner.sweep.golden, the key the
raid-level sweep's cells use), loaded into the image when it is built and cloned here with `cp -a`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

import mvhelpers
from copyhelpers import RowWriter
from labhelpers import BIG_DISKS, cli, sh, slow_resync, wipe_md
from datadir_mover.move import executor
from datadir_mover.move.copy import RACY_MARGIN_NS, Manifest, digest_file, tree
from datadir_mover.move.copy.redo import REDO_START
from datadir_mover.lab.image import LAB_REDO_OPTION
from tuner.core.errors import MoveError
from tuner.core import sandbox as sbx
from tuner.core.probe import file_is_dax
from tuner.core.sandbox import Sandbox, list_sandboxes
from tuner.core.server import inspect
from tuner.sweep import golden as golden_mod
from waiting import wait_for

PMEM, R10 = "/mnt/pmem", "/mnt/r10"


@pytest.fixture(scope="module")
def tiers():
    wipe_md(BIG_DISKS)
    with slow_resync():
        cli("tiers", "create", "pmem", "--source", "nvdimm", "--region", "region0", "--mount", PMEM)
        cli("tiers", "create", "raid", "--level", "10", "--devices", *BIG_DISKS, "--name", "r10", "--chunk", "64K",
            "--mount", R10)
        yield
        _destroy_sandboxes()
        cli("tiers", "destroy", PMEM, "--force", check=False)
        cli("tiers", "destroy", R10, "--force", check=False)
        wipe_md(BIG_DISKS)


@pytest.fixture(scope="module")
def golden():
    bins = sbx.find_binaries(None)
    key = golden_mod.key_of(bins, "16k", 1)
    # loaded natively when the image was built (datadir_mover.lab.image.GOLDEN_SCRIPT): never under emulation
    assert golden_mod.is_present(key), f"the lab image carries no golden copy {key.id}; rebuild it (lab build --force)"
    return key, bins


def _destroy_sandboxes(keep: str | None = None) -> None:
    for sb in list_sandboxes():
        if sb.name != keep:
            sb.destroy(force=True)


# the clones run with the redo log size the image's golden copy was loaded with (16 MiB: every move here copies
# the datadir under emulation), so their servers start without resizing it
CLONE_OPTIONS = LAB_REDO_OPTION


def _clone(name: str, golden) -> Sandbox:
    """A running sandbox on a plain copy of the golden datadir (the golden copy itself was verified)."""
    key, bins = golden
    data = sbx.sandboxes_dir() / name / "data"
    data.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(key.dir / "data"), str(data)], check=True)
    sb = sbx.adopt(name, data, key.dir / "client.cnf", key.page_size, bins, options=CLONE_OPTIONS)
    sb.start()
    return sb


def _apply(sandbox: str, component: str, to: str, env: dict | None = None, check: bool = True):
    proc = cli("move", "apply", component, "--sandbox", sandbox, "--to", to, "--yes", "--json", check=check,
               env=env)
    return proc, (json.loads(proc.stdout) if proc.returncode == 0 else None)


def _crash_mid_copy(sandbox: str, component: str, to: str) -> str:
    """`move apply` SIGKILLed in the middle of its copy; returns the id of the move left open."""
    proc, _ = _apply(sandbox, component, to, env={"INNOTIER_MOVE_CRASH_AT": "COPY:mid"}, check=False)
    assert proc.returncode in (-9, 137), (proc.returncode, proc.stderr)
    status = json.loads(cli("move", "status", "--json").stdout)
    open_moves = [m for m in status if m.get("phase") == "open"]
    assert len(open_moves) == 1, status
    return open_moves[0].get("move_id") or open_moves[0].get("id")


def _running(name: str) -> Sandbox:
    sb = Sandbox.load(name)
    if sb.state().name != "RUNNING":
        sb.start()
    return sb


def _tpcc_run_and_check(sandbox: str) -> None:
    cli("tpcc", "run", "--sandbox", sandbox, "--clients", "2", "--warmup", "0", "--duration", "3",
        "--interval", "3")
    cli("tpcc", "check", "--sandbox", sandbox)


@pytest.fixture(scope="module")
def golden_checksums(golden) -> dict:
    """The golden datadir's table checksums, taken once on the first clone (lab-dax, which the datadir test moves):
    every clone is a copy of the same files, so a move of any clone must leave exactly these."""
    if "lab-dax" not in {s.name for s in list_sandboxes()}:
        _clone("lab-dax", golden)
    return mvhelpers.checksums(_running("lab-dax").connection_spec())


def test_datadir_onto_dax_sigkill_mid_copy_then_resume_then_tpcc(tiers, golden, golden_checksums):
    before = golden_checksums
    move_id = _crash_mid_copy("lab-dax", "datadir", f"{PMEM}/data")
    result = json.loads(cli("move", "resume", "--id", move_id, "--json").stdout)
    assert result["phase"] == "committed", result
    sb = _running("lab-dax")
    assert inspect(sb.connection_spec()).datadir.rstrip("/") == f"{PMEM}/data"
    ibdata = Path(PMEM, "data", "ibdata1")
    assert file_is_dax(str(ibdata)) is True               # statx STATX_ATTR_DAX on the moved file
    assert mvhelpers.checksums(sb.connection_spec()) == before
    _tpcc_run_and_check("lab-dax")


def test_persist_on_the_dax_tier_restores_the_last_consistent_copy(tiers, golden, tmp_path):
    sb = _running("lab-dax")                              # its datadir is on the DAX tier since the test above
    spec = sb.connection_spec()
    backing = "/root/persist-dax"                         # the root disk: another file system than the tier
    out = json.loads(cli("persist", "install", "--sandbox", "lab-dax", "--tier", PMEM, "--backing", backing,
                         "--interval", "5m", "--unit-dir", str(tmp_path / "units"), "--first-sync",
                         "--json").stdout)
    assert out["verified_with"] == "systemd-analyze verify" and len(out["written"]) == 3
    assert out["first_sync"]["method"] == "mariadb-backup"
    synced = mvhelpers.checksums(spec)
    conn = spec.connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE after_sync")             # committed after the copy: lost with the tier
    cur.execute("SHOW DATABASES LIKE 'after_sync'")
    assert cur.fetchall() == [("after_sync",)]
    conn.close()
    sb.stop("kill")                                       # power loss
    device = next(line.split()[0] for line in Path("/proc/mounts").read_text().splitlines()
                  if line.split()[1] == PMEM)
    sh("umount", PMEM)                                    # the DAX file system is lost: made anew, empty
    sh("mkfs.ext4", "-q", "-F", "-b", "4096", device)
    sh("mount", "-o", "dax", device, PMEM)
    assert not (Path(PMEM) / "data").exists()
    restored = json.loads(cli("persist", "restore", "--backing", backing, "--if-needed", "--json").stdout)
    assert restored["restored"] is True and restored["generation"] == out["first_sync"]["id"], restored
    assert file_is_dax(str(Path(PMEM, "data", "ibdata1"))) is True
    sb.start(recover=True)
    # every table equals the synced state, which is the state the TPC-C checks passed on in the test above
    # (nothing wrote between that check and the sync): no second round of checks under emulation
    assert mvhelpers.checksums(spec) == synced
    conn = spec.connect()
    cur = conn.cursor()
    cur.execute("SHOW DATABASES LIKE 'after_sync'")
    assert cur.fetchall() == []
    conn.close()
    _destroy_sandboxes()                                  # one server at a time: the guest has 1.5 GiB


def test_redo_onto_raid10_sigkill_then_rollback_then_move_and_tpcc(tiers, golden, golden_checksums):
    sb = _clone("lab-r10", golden)
    spec = sb.connection_spec()
    before = golden_checksums                            # a clone of the same golden files (no second checksum run)
    old_redo = inspect(spec).datadir.rstrip("/")
    move_id = _crash_mid_copy("lab-r10", "redo", f"{R10}/redo")
    cli("move", "rollback", "--id", move_id, "--yes", "--json")
    sb = _running("lab-r10")
    assert Path(old_redo, "ib_logfile0").exists()
    assert mvhelpers.checksums(sb.connection_spec()) == before
    _, result = _apply("lab-r10", "redo", f"{R10}/redo")
    assert result["phase"] == "committed", result
    assert any(p.name.startswith("ib_logfile") for p in Path(R10, "redo").iterdir())
    assert mvhelpers.checksums(sb.connection_spec()) == before
    _tpcc_run_and_check("lab-r10")
    _destroy_sandboxes()


# ---------------------------------------------------------------- a redo log written through a MAP_SYNC mapping

DAX_REDO = "lab-daxredo"
REDO_LOG = "ib_logfile0"
REDO_SIZE = 4 << 20  # wraps in a few statements


WRITEBACK = Path("/proc/sys/vm/dirty_writeback_centisecs")


@pytest.fixture
def no_periodic_writeback():
    """The kernel's periodic writeback off during a test: a writeback (like a sync, or an fsync of the log)
    write-protects the mapping's pages, so the server's next store faults and changes mtime.  Here 45 s of commits
    with the default writeback (5 s, expiry 30 s) changed the log's mtime not once, so a move usually sees an unchanged
    stat anyway; with it off that is certain, and so is the negative control's outcome."""
    before = WRITEBACK.read_text().strip()
    WRITEBACK.write_text("0")
    try:
        yield
    finally:
        WRITEBACK.write_text(before)


@pytest.fixture(scope="module")
def dax_redo(tiers, golden):
    """A server whose datadir, and so its ib_logfile0, lives on the DAX mount, with a 4 MiB redo log; two tables
    the row writers fill (one per move)."""
    key, bins = golden
    data = Path(PMEM, "daxredo", "data")
    data.parent.mkdir()
    subprocess.run(["cp", "-a", str(key.dir / "data"), str(data)], check=True)
    sb = sbx.adopt(DAX_REDO, data, key.dir / "client.cnf", key.page_size, bins,
                   options={"innodb_log_file_size": str(REDO_SIZE)})
    sb.start()
    conn = sb.connection_spec().with_database(None).connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE daxredo")
    for table in ("blobs (id INT AUTO_INCREMENT PRIMARY KEY, v LONGBLOB)", "neg (id INT PRIMARY KEY, at DATETIME(6))",
                  "pos (id INT PRIMARY KEY, at DATETIME(6))"):
        cur.execute(f"CREATE TABLE daxredo.{table} ENGINE=InnoDB")
    conn.close()
    yield sb
    if DAX_REDO in {s.name for s in list_sandboxes()}:
        Sandbox.load(DAX_REDO).destroy(force=True)


def _log_mapping(sb: Sandbox, log: Path) -> list[tuple[str, str]]:
    """(maps line, VmFlags) of every mapping of ``log`` in the server (/proc/PID/smaps)."""
    pid = int(sb.pid_file.read_text().strip())
    real = os.path.realpath(log)
    out, header = [], None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if line.startswith("VmFlags:") and header:
            out.append((header, line.split(":", 1)[1].strip()))
            header = None
        elif not line[:1].isupper():  # a mapping's first line: "start-end perms offset dev inode path"
            header = line if line.endswith(real) else None
    return out


def _status(cur, name: str) -> int:
    cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
    return int(cur.fetchone()[1])


def _mapped_and_wrapped(sb: Sandbox) -> Path:
    """The server maps its log on the DAX mount MAP_SHARED|MAP_SYNC; write redo until more LSNs were logged than the
    circular file holds (every page of the mapping stored into since the server mapped it: later stores fault no
    more, so they leave mtime and ctime alone).  The log's path."""
    log = Path(sb.datadir, REDO_LOG)
    mapping = _log_mapping(sb, log)
    assert mapping and all(" rw-s " in m and "sf" in flags.split() for m, flags in mapping), \
        f"ib_logfile0 is not mapped shared and synchronous (MAP_SYNC: VmFlags sf) on the DAX mount: {mapping}"
    capacity = log.stat().st_size - REDO_START
    conn = sb.connection_spec().with_database(None).connect()
    try:
        cur = conn.cursor()
        began = _status(cur, "Innodb_lsn_current")
        for _ in range(40):  # each statement logs about 500 KB
            if _status(cur, "Innodb_lsn_current") - began > capacity:
                break
            cur.execute("INSERT INTO daxredo.blobs (v) VALUES (REPEAT('x', 500000))")
            conn.commit()
        else:
            raise AssertionError(f"the redo log did not wrap: {_status(cur, 'Innodb_lsn_current') - began} LSNs "
                                 f"logged, capacity {capacity}")
    finally:
        conn.close()
    return log


def _observe_switch(monkeypatch, then=None) -> dict:
    """At SWITCH (server stopped, source frozen, copy verified): the two logs' bytes, the log's stat against the last
    online pass's record of it, COPY's figures; then ``then(move context)`` and the mover's own SWITCH."""
    seen: dict = {}
    original = executor.HANDLERS["SWITCH"]

    def switch(ex, lock, cache):   # the step's own inputs (stepbase): the move context, the commit block, the passes
        src, dst = Path(ex.plan.source_dir, REDO_LOG), Path(ex.plan.target_dir, REDO_LOG)
        a, b = src.read_bytes(), dst.read_bytes()
        last = Manifest.from_dict(ex.journal.load_json("precopy-manifest.json")).records[REDO_LOG]
        st = src.stat()
        differs = None if a == b else next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        seen.update(equal=a == b, first_difference=differs,
                    stat_as_at_last_pass=(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) ==
                    (last.size, last.mtime_ns, last.ctime_ns, last.ino),
                    changed_since_last_pass=last.digest != digest_file(str(src), drop_cache=False),
                    copy=ex.journal.data("COPY"), move_id=ex.plan.move_id)
        if then:
            then(ex)
        return original(ex, lock, cache)

    monkeypatch.setitem(executor.HANDLERS, "SWITCH", switch)
    return seen


def _move_redo_under_writes(sb: Sandbox, log: Path, table: str, to: str):
    """`move apply redo --precopy` while a client commits into ``table``; (CLI result, the writer)."""
    writer = RowWriter(sb.connection_spec(), table)
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) >= 20, 60, f"20 rows committed into {table} before the move")
        # the log's last timestamp change (its last first store into a page) is older than the racily-clean margin,
        # so a pass may keep it by its stat: the condition the content rule is for
        wait_for(lambda: time.time_ns() - log.stat().st_mtime_ns > RACY_MARGIN_NS, 30,
                 "the log's mtime to be older than the racily-clean margin")
        proc = cli("move", "apply", "redo", "--sandbox", DAX_REDO, "--to", to, "--precopy", "--verify", "files",
                   "--yes", "--json", check=False)
        if proc.returncode == 0:
            at_start = len(writer.acked)
            wait_for(lambda: len(writer.acked) >= at_start + 10, 60, "10 commits on the moved log")
    finally:
        writer.stop.set()
        writer.join(30)
    return proc, writer


def _rows_lost(sb: Sandbox, table: str, writer: RowWriter) -> list[int]:
    conn = sb.connection_spec().with_database(None).connect()
    cur = conn.cursor()
    cur.execute(f"SELECT id FROM {table}")
    lost = sorted(set(writer.acked) - {r[0] for r in cur.fetchall()})
    conn.close()
    return lost


def test_negative_control_a_redo_log_kept_by_stat_off_dax_is_stale_and_the_proof_names_it(dax_redo, monkeypatch,
                                                                                          no_periodic_writeback):
    """The content rule for redo replaced by the stat rule (``tree.trusted_by_stat``): the last pass keeps the log's
    pre-copy because its stat did not change, the target's log differs from the stopped source's, and the mover's
    proof (`move verify`, run at the switch: the source is frozen from the stop on) fails naming ib_logfile0.  The
    move is then failed on purpose before START, so the automatic rollback puts the server back on its DAX log and
    no server ever runs on the stale copy."""
    log = _mapped_and_wrapped(dax_redo)
    monkeypatch.setattr(tree, "trusted_by_stat", lambda rel: True)
    proofs = []

    def prove_then_fail(ex):
        proofs.append(json.loads(cli("move", "verify", "--id", ex.plan.move_id, "--json", check=False).stdout))
        raise MoveError("negative control: stopped at the switch")

    seen = _observe_switch(monkeypatch, prove_then_fail)
    proc, writer = _move_redo_under_writes(dax_redo, log, "daxredo.neg", "/root/daxredo-neg")
    assert proc.returncode != 0 and "rolled back" in proc.stderr, proc.stderr
    assert seen["stat_as_at_last_pass"] and seen["changed_since_last_pass"], \
        f"the log's stat changed between the last online pass and the stop (or its content did not): {seen}"
    assert seen["copy"]["files_unchanged_since_precopy"] == 1, seen["copy"]   # kept by stat...
    assert not seen["equal"], seen                                            # ...and stale
    assert proofs and proofs[0]["status"] == "failed", proofs
    assert [m["file"] for m in proofs[0]["mismatches"]] == [REDO_LOG], proofs[0]["mismatches"]
    sb = _running(DAX_REDO)                               # back on its own log on the DAX mount
    assert _log_mapping(sb, Path(PMEM, "daxredo", "data", REDO_LOG))
    assert not _rows_lost(sb, "daxredo.neg", writer)


def test_wrapped_redo_log_mapped_on_dax_moved_with_precopy_under_writes_is_equal_at_the_stop(dax_redo, monkeypatch,
                                                                                             no_periodic_writeback):
    """The same move with the mover's own rules: the log's stat is the one the last online pass recorded although
    its content changed since (the stores, and the shutdown's checkpoint, went through the mapping), yet the last pass
    rewrote it by LSN range: at the switch the target's log is the source's byte for byte, the proof passes, no
    acknowledged row is lost and the server runs on the moved log."""
    sb = _running(DAX_REDO)
    log = _mapped_and_wrapped(sb)
    seen = _observe_switch(monkeypatch)
    proc, writer = _move_redo_under_writes(sb, log, "daxredo.pos", "/root/daxredo-back")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["phase"] == "committed" and result["precopy"]["passes"], result
    assert seen["stat_as_at_last_pass"] and seen["changed_since_last_pass"], \
        f"the log's stat changed between the last online pass and the stop (or its content did not): {seen}"
    assert seen["copy"]["files_delta"] == 1 and seen["copy"]["files_unchanged_since_precopy"] == 0, seen["copy"]
    assert seen["equal"], f"the target's redo log differs from the source's at the stop: {seen}"
    proof = json.loads(cli("move", "verify", "--id", seen["move_id"], "--json").stdout)
    assert proof["status"] == "passed" and not proof["mismatches"], proof
    sb = _running(DAX_REDO)
    conn = sb.connection_spec().with_database(None).connect()
    cur = conn.cursor()
    cur.execute("SELECT @@innodb_log_group_home_dir")
    assert cur.fetchone()[0].rstrip("/") == "/root/daxredo-back"
    conn.close()
    assert not _rows_lost(sb, "daxredo.pos", writer)
    _destroy_sandboxes()


def test_tiers_bench_on_dax_and_raid10(tiers):
    dax = json.loads(cli("tiers", "bench", PMEM, "--size", "16M", "--runtime", "1", "--json").stdout)
    assert dax["tier"]["kind"] == "dcpmm-fsdax" and dax["tier"]["dax"] is True
    assert {j["name"] for j in dax["jobs"]} and all(j["iops"] > 0 for j in dax["jobs"])
    r10 = json.loads(cli("tiers", "bench", R10, "--size", "16M", "--runtime", "1", "--json").stdout)
    assert r10["tier"]["kind"] == "md-raid"
    assert r10["raid"]["level"] == 10 and r10["raid"]["devices"] == 4, r10["raid"]


def test_profile_lint_on_the_dax_mount_flags_the_papers_harmful_settings(tiers, tmp_path):
    cnf = tmp_path / "my.cnf"
    cnf.write_text("[mysqld]\ninnodb_page_size=16k\ninnodb_doublewrite=0\n"
                   "innodb_flush_method=O_DIRECT_NO_FSYNC\n")
    out = json.loads(cli("profile", "lint", str(cnf), "--flavor", "mysql-8.0", "--tier", PMEM, "--json",
                         check=False).stdout)
    flagged = {f["option"] for f in out["findings"]}
    assert {"innodb_doublewrite", "innodb_page_size", "innodb_flush_method"} <= flagged, out
