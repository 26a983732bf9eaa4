"""The redo log (datadir_mover/move/copy/redo.py): the LSN-range delta of a MariaDB 10.8+ ib_logfile0, offline and
online, and no trust by stat for a file the server writes through a shared mapping."""

from __future__ import annotations

import mmap
import os
import shutil
from pathlib import Path

import pytest

from copyhelpers import RowWriter, age, move, trust_timestamps
from datadir_mover.move.copy import BLOCK, copy_tree, digest_file, walk
from datadir_mover.move.copy.redo import REDO_START, redo_ranges
from waiting import wait_for

PAGE = 16384
LOG_SIZE = 8 << 20


def _redo_log(path: Path) -> None:
    """A MariaDB 10.8+ ib_logfile0: "Phys" header with first LSN 12288, checkpoint blocks, random log body."""
    body = bytearray(os.urandom(LOG_SIZE))
    body[:12288] = bytes(12288)  # header and both checkpoint blocks
    body[0:4] = b"Phys"
    body[8:16] = (12288).to_bytes(8, "big")
    path.write_bytes(bytes(body))
    _checkpoint(path, 50_000, 50_000)


def _checkpoint(path: Path, checkpoint: int, end: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(4096)
        fh.write(checkpoint.to_bytes(8, "big") + end.to_bytes(8, "big"))


def _append_log(path: Path, lsn: int, n: int) -> None:
    """The server appends n bytes of log at LSN ``lsn`` (wrapping around the circular file)."""
    data = os.urandom(n)
    with open(path, "r+b") as fh:
        for a, b in redo_ranges(lsn, lsn + n, 12288, LOG_SIZE):
            fh.seek(a)
            fh.write(data[:b - a])
            data = data[b - a:]


def _copied_redo_log(tmp_path: Path, floor: int):
    """(src, dst, log, manifest): a redo log copied by a pass that began with ``floor`` as Innodb_lsn_flushed."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    log = src / "ib_logfile0"
    _redo_log(log)
    age(log)
    first, _ = copy_tree(src, dst, walk(src), log_floor=floor)
    trust_timestamps(first)
    return src, dst, log, first


@pytest.mark.parametrize("floor,written,clean,reads_blocks", [
    (1_000_000, 300_000, True, (2, 10)),  # header and last blocks + those of [floor - margin, end + margin]
    (LOG_SIZE - 100_000, 300_000, True, (2, 10)),  # the new log wraps to the start of the circle
    (1_000_000, 300_000, False, (128, 128)),  # checkpoint behind the end: not a clean stop, read whole
], ids=["inside", "wrapping", "unclean"])
def test_offline_delta_of_the_redo_log_reads_only_what_was_logged_since_the_pass(tmp_path, floor, written, clean,
                                                                                  reads_blocks):
    src, dst, log, first = _copied_redo_log(tmp_path, floor)
    _append_log(log, floor, written)  # logged after the pass read the file, then the shutdown's checkpoint
    _checkpoint(log, floor + written if clean else floor, floor + written)
    read = []
    final, st = copy_tree(src, dst, walk(src), previous=first, verify=False, page_size=PAGE, progress=read.append,
                          stable=True)  # the server is stopped: the end LSN is final
    assert st.files_delta == 1
    assert (dst / "ib_logfile0").read_bytes() == log.read_bytes()
    assert reads_blocks[0] * BLOCK <= sum(read) <= reads_blocks[1] * BLOCK, sum(read) / BLOCK
    assert final.records["ib_logfile0"].digest == digest_file(str(log))
    trust_timestamps(final)
    _append_log(log, floor + written, 1000)  # the server runs again: its checkpoint block says nothing of the end
    read = []
    copy_tree(src, dst, walk(src), previous=final, page_size=PAGE, progress=read.append)
    assert sum(read) == LOG_SIZE  # online without the current LSN: read whole
    assert (dst / "ib_logfile0").read_bytes() == log.read_bytes()


def test_online_redo_pass_reads_the_lsns_up_to_the_current_one(tmp_path):
    src, dst, log, first = _copied_redo_log(tmp_path, 1_000_000)
    _append_log(log, 1_000_000, 200_000)  # logged since; the checkpoint block still says 50,000
    read = []
    second, st = copy_tree(src, dst, walk(src), previous=first, page_size=PAGE, progress=read.append,
                           log_floor=1_150_000, log_now=1_200_010)  # flushed and current LSN at pass start
    assert 2 * BLOCK <= sum(read) <= 8 * BLOCK and st.files_delta == 1
    assert (dst / "ib_logfile0").read_bytes() == log.read_bytes()
    assert second.records["ib_logfile0"].verified and second.records["ib_logfile0"].log_floor == 1_150_000


# ---------------------------------------------------------------- writes through a shared mapping


@pytest.mark.root
@pytest.mark.parametrize("rel", ["ib_logfile0", "#innodb_redo/#ib_redo7", "tc.log"],
                         ids=["mariadb-redo", "mysql-redo", "tc-log"])
def test_a_store_through_a_shared_mapping_is_not_hidden_by_an_unchanged_stat(mv_tiers, tmp_path, rel):
    """A store into an already faulted-in page of a MAP_SHARED mapping of a tmpfs file changes neither mtime nor ctime
    (the fault injected here, checked below); a redo log is compared by content on every pass all the same."""
    src = Path(mv_tiers["tmpfs"]) / f"mapped-{rel.replace('/', '_').replace('#', '')}"
    dst = tmp_path / "dst"
    (src / rel).parent.mkdir(parents=True)
    dst.mkdir()
    path = src / rel
    path.write_bytes(os.urandom(1 << 20))
    fd = os.open(path, os.O_RDWR)
    try:
        m = mmap.mmap(fd, 1 << 20, mmap.MAP_SHARED)
        for off in range(0, 1 << 20, mmap.PAGESIZE):  # every page faulted in for writing, as the server's log is
            m[off] = m[off]
        age(path)
        first, _ = copy_tree(src, dst, walk(src))
        trust_timestamps(first)
        before = os.stat(path)
        m[500_000:500_008] = b"LSN 4242"  # the server appends to its log through the mapping
        m.flush()
        m.close()
    finally:
        os.close(fd)
    after = os.stat(path)
    assert (after.st_mtime_ns, after.st_ctime_ns) == (before.st_mtime_ns, before.st_ctime_ns), \
        "this kernel updates timestamps on stores through a mapping: the fault is not injected"
    second, st = copy_tree(src, dst, walk(src), previous=first)
    assert st.files_skipped == 0 and st.files_delta == 1 and st.bytes_copied == BLOCK
    assert (dst / rel).read_bytes() == path.read_bytes()
    assert second.records[rel].digest == digest_file(str(path))
    shutil.rmtree(src)


def _maps_of(sb, path: Path) -> list[str]:
    """The lines of the server's /proc/PID/maps that map ``path``."""
    pid = int(sb.pid_file.read_text().strip())
    real = os.path.realpath(path)
    return [line for line in Path(f"/proc/{pid}/maps").read_text().splitlines() if line.endswith(real)]


def _status(conn, name: str) -> int:
    cur = conn.cursor()
    cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
    return int(cur.fetchone()[1])


def _wrap(spec, log: Path) -> None:
    """Write redo until the circular log has wrapped: more LSNs logged since its first than it holds."""
    with open(log, "rb") as fh:
        first_lsn = int.from_bytes(fh.read(16)[8:16], "big")
    capacity = os.stat(log).st_size - REDO_START
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        for _ in range(40):  # each statement logs several MiB; a 32 MiB log wraps in a few
            if _status(conn, "Innodb_lsn_current") - first_lsn > 2 * capacity:
                return
            cur.execute("UPDATE tpcc.stock SET s_quantity = s_quantity + 1")
        raise AssertionError(f"the redo log did not wrap: LSN {_status(conn, 'Innodb_lsn_current')}, "
                             f"first {first_lsn}, capacity {capacity}")
    finally:
        conn.close()


@pytest.mark.root
def test_wrapped_redo_log_mapped_on_dev_shm_is_equal_on_the_target_at_the_stop(clone):
    """MariaDB maps ib_logfile0 MAP_SHARED on /dev/shm and writes it with stores.  The log, wrapped, is moved back to
    a disk with --precopy while a client commits: when the server has stopped (SWITCH), the target's log is the
    source's byte for byte, and no acknowledged row is lost."""
    sb = clone("mv-shmredo")
    spec = sb.connection_spec()
    shm = Path(f"/dev/shm/innotier-test-{os.getpid()}-redo")
    back = Path(sb.dir) / "redo-back"
    writer = RowWriter(spec, "mvr.rows")
    try:
        ex, _ = move(sb.name, "redo", str(shm), precopy=False, verify="files")
        assert ex.run().phase == "committed"
        ex.finalize(accept_volatile=True)  # /dev/shm: the test keeps no persistence
        log = shm / "ib_logfile0"
        maps = _maps_of(sb, log)
        assert maps and all(" rw-s " in line for line in maps), f"ib_logfile0 is not mapped shared: {maps}"
        _wrap(spec, log)
        conn = spec.with_database(None).connect()
        conn.cursor().execute("CREATE DATABASE mvr")
        conn.cursor().execute("CREATE TABLE mvr.rows (id INT PRIMARY KEY, at DATETIME(6)) ENGINE=InnoDB")
        conn.close()
        writer.start()
        wait_for(lambda: len(writer.acked) >= 50, 60, "50 rows committed before the move")
        at_stop: dict[str, str] = {}

        def compare(state: str) -> None:
            if state == "SWITCH":  # the server is stopped; nothing writes either file
                at_stop["source"] = digest_file(str(log), drop_cache=False)
                at_stop["target"] = digest_file(str(back / "ib_logfile0"), drop_cache=False)

        ex, _ = move(sb.name, "redo", str(back), precopy=True, on_state=compare)
        result = ex.run()
        at_start = len(writer.acked)
        wait_for(lambda: len(writer.acked) >= at_start + 10, 60, "10 commits on the moved log")
    finally:
        writer.stop.set()
        if writer.is_alive():
            writer.join(10)
        shutil.rmtree(shm, ignore_errors=True)  # the sandbox itself is destroyed by the clone fixture
    assert result.phase == "committed" and result.precopy.passes, result
    assert at_stop and at_stop["source"] == at_stop["target"], "the target's redo log differs from the source's"
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute("SELECT id FROM mvr.rows")
    lost = sorted(set(writer.acked) - {r[0] for r in cur.fetchall()})
    conn.close()
    assert not lost, f"{len(lost)} committed rows are missing after the move: {lost[:10]}"
