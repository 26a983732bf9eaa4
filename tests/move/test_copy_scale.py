"""The copy at scale: block deltas between passes, holes kept through every path, read-back from the medium,
a flipped byte caught before the switch, and a writer that loses no committed row across a pre-copied move.

Unit parts run on files under pytest's tmp_path (the root file system: O_DIRECT read-back) and on
the session's real tmpfs (read-back of memory); the live parts move a clone of the golden sandbox.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

import mvhelpers

from datadir_mover.move import copy as cp
from datadir_mover.move.copy import BLOCK, RACY_MARGIN_NS, copy_tree, digest_file, walk
from tuner.core.errors import MoveError



def _age(path: Path) -> None:
    """Make a file look modified long before any copy read it (the racily-clean rule does not apply)."""
    old = time.time_ns() - 10 * RACY_MARGIN_NS
    os.utime(path, ns=(old, old))


def _trust_timestamps(manifest) -> None:
    # ctime cannot be set back: pretend the pass read every file long after its last change
    for rec in manifest.records.values():
        rec.read_at_ns += 10 * RACY_MARGIN_NS


# ---------------------------------------------------------------- deltas between passes


def test_changed_file_is_copied_again_only_its_changed_blocks(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "hot.ibd").write_bytes(os.urandom(200 * BLOCK + 123))  # several 8 MiB chunks and a partial last block
    (src / "cold.ibd").write_bytes(os.urandom(3 * BLOCK))
    for f in ("hot.ibd", "cold.ibd"):
        _age(src / f)
    first, st1 = copy_tree(src, dst, walk(src))
    assert st1.files_copied == 2 and st1.files_delta == 0
    _trust_timestamps(first)

    with open(src / "hot.ibd", "r+b") as fh:  # the server writes one page in block 150 and appends
        fh.seek(150 * BLOCK + 16384)
        fh.write(os.urandom(16384))
        fh.seek(0, os.SEEK_END)
        fh.write(os.urandom(5000))
    second, st2 = copy_tree(src, dst, walk(src), previous=first)
    assert st2.files_copied == 1 and st2.files_skipped == 1 and st2.files_delta == 1
    # block 150, the old partial last block and the new tail: nothing else was rewritten
    assert st2.bytes_copied <= 3 * BLOCK, st2.bytes_copied
    assert second.records["hot.ibd"].verified
    assert digest_file(str(dst / "hot.ibd")) == digest_file(str(src / "hot.ibd")) == second.records["hot.ibd"].digest
    assert (dst / "hot.ibd").read_bytes() == (src / "hot.ibd").read_bytes()


def _copied_once(tmp_path, blocks: int):
    """(src, dst, manifest): one file of ``blocks`` random blocks, copied and verified."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "f").write_bytes(os.urandom(blocks * BLOCK))
    _age(src / "f")
    first, _ = copy_tree(src, dst, walk(src))
    return src, dst, first


def test_delta_without_block_digests_copies_the_file_whole(tmp_path):
    """After a restart of the mover the passes' block digests are gone: changed files are copied whole."""
    src, dst, first = _copied_once(tmp_path, 20)
    reloaded = cp.Manifest.from_dict(first.to_dict())
    assert not reloaded.blocks
    (src / "f").write_bytes(os.urandom(20 * BLOCK))
    second, st = copy_tree(src, dst, walk(src), previous=reloaded)
    assert st.files_delta == 0 and st.bytes_copied == 20 * BLOCK
    assert (dst / "f").read_bytes() == (src / "f").read_bytes()


def test_target_changed_behind_our_back_is_not_delta_copied(tmp_path):
    """The block digests only describe the target as verified; a target touched since is rewritten whole."""
    src, dst, first = _copied_once(tmp_path, 10)
    _trust_timestamps(first)
    with open(dst / "f", "r+b") as fh:  # someone scribbles on the copy
        fh.seek(3 * BLOCK)
        fh.write(b"scribble")
    with open(src / "f", "r+b") as fh:
        fh.seek(7 * BLOCK)
        fh.write(b"server write")
    second, st = copy_tree(src, dst, walk(src), previous=first)
    assert st.files_delta == 0
    assert (dst / "f").read_bytes() == (src / "f").read_bytes()


# ---------------------------------------------------------------- holes


def test_preallocated_file_stays_allocated(tmp_path):
    """A redo log as InnoDB makes it (fallocate, then written in part) is allocated whole on the target too, though
    its unwritten extents read as holes once their pages left the page cache."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    log = src / "ib_logfile0"
    size = 32 << 20
    fd = os.open(log, os.O_RDWR | os.O_CREAT, 0o640)
    try:
        os.posix_fallocate(fd, 0, size)
        os.pwrite(fd, os.urandom(1 << 20), 0)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    assert os.stat(log).st_blocks * 512 >= size
    read = []
    m, _ = copy_tree(src, dst, walk(src), progress=read.append)
    assert os.stat(dst / "ib_logfile0").st_blocks * 512 >= size, "the copy of a preallocated file is sparse"
    assert (dst / "ib_logfile0").read_bytes() == log.read_bytes()
    assert m.records["ib_logfile0"].digest == digest_file(str(log))


def test_sparse_file_stays_sparse_through_a_delta_pass(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    size = 256 << 20  # 4 pieces, 32 chunks: holes across piece and chunk boundaries
    data = [(0, os.urandom(1 << 20)), ((70 << 20) + 4096, os.urandom(8192)), ((200 << 20), os.urandom(3 << 20))]
    mvhelpers.write_sparse(src / "ibdata1", size, data)
    _age(src / "ibdata1")
    m, _ = copy_tree(src, dst, walk(src))
    s, d = os.stat(src / "ibdata1"), os.stat(dst / "ibdata1")
    assert d.st_size == s.st_size and d.st_blocks * 512 <= s.st_blocks * 512 + (1 << 20), "holes were filled"
    assert m.records["ibdata1"].digest == digest_file(str(dst / "ibdata1"))
    # a later pass that changes one data block keeps the rest of the holes
    _trust_timestamps(m)
    with open(src / "ibdata1", "r+b") as fh:
        fh.seek(200 << 20)
        fh.write(os.urandom(4096))
    m2, st = copy_tree(src, dst, walk(src), previous=m)
    assert st.files_delta == 1 and st.bytes_copied == BLOCK
    d2 = os.stat(dst / "ibdata1")
    assert d2.st_blocks * 512 <= s.st_blocks * 512 + (1 << 20), "a delta pass filled the holes"
    assert (dst / "ibdata1").read_bytes() == (src / "ibdata1").read_bytes()


def test_hole_written_during_an_online_pass_is_hashed_as_the_hole_copied(tmp_path, monkeypatch):
    """The server writes into a hole after the pass read the extent map: the read-back still agrees, the next pass
    copies the block."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    log = src / "ib_logfile0"
    mvhelpers.write_sparse(log, 4 << 20, [(0, os.urandom((1 << 20) + 4096))])  # data, then a hole in one chunk
    _age(log)
    real = cp._data_extents

    def stale_map(fd, start, end):  # the map says hole after 1 MiB + 4 KiB, but the server has just written there
        got = real(fd, start, end)
        with open(log, "r+b") as fh:
            fh.seek((1 << 20) + 65536)
            fh.write(b"\x5a" * 4096)
        return got

    monkeypatch.setattr(cp, "_data_extents", stale_map)
    first, _ = copy_tree(src, dst, walk(src))  # verified: the digest covers the hole as copied
    monkeypatch.setattr(cp, "_data_extents", real)
    assert first.records["ib_logfile0"].verified
    _trust_timestamps(first)
    first.records["ib_logfile0"].mtime_ns -= 1  # the server's write changed the file after the pass read it
    second, st = copy_tree(src, dst, walk(src), previous=first)
    assert st.files_delta == 1 and (dst / "ib_logfile0").read_bytes() == log.read_bytes()


@pytest.mark.root
@pytest.mark.parametrize("stable", [False, True], ids=["online", "stopped-source"])
def test_copy_to_tmpfs_reads_back_and_catches_a_flip(mv_tiers, tmp_path, stable):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.ibd").write_bytes(os.urandom((cp.SEGMENT * 2) + 777))  # two pieces in parallel and a tail
    (src / "b.ibd").write_bytes(os.urandom(12345))
    mvhelpers.write_sparse(src / "ibdata1", cp.SEGMENT + (8 << 20), [(0, os.urandom(1 << 20)),
                                                                      (cp.SEGMENT + 4096, os.urandom(8192))])
    dst = Path(mv_tiers["tmpfs"]) / "copy-scale"
    dst.mkdir()
    try:
        assert cp.on_memory_fs(dst)
        m, _ = copy_tree(src, dst, walk(src), verify=False, stable=stable)
        assert os.stat(dst / "ibdata1").st_blocks * 512 < 4 << 20, "holes were filled on the tmpfs"
        cp.verify_tree(m)  # the read-back of the tmpfs agrees with the source
        assert os.stat(dst / "ibdata1").st_blocks * 512 < 4 << 20, "the read-back filled the holes"
        assert (dst / "a.ibd").read_bytes() == (src / "a.ibd").read_bytes()
        for rec in m.records.values():
            rec.verified = False
        with open(dst / "a.ibd", "r+b") as fh:  # one byte, in the second piece
            fh.seek(cp.SEGMENT + 4242)
            b = fh.read(1)
            fh.seek(cp.SEGMENT + 4242)
            fh.write(bytes([b[0] ^ 0x01]))
        with pytest.raises(MoveError, match="differs from its source"):
            cp.verify_tree(m)
    finally:
        import shutil

        shutil.rmtree(dst)


# ---------------------------------------------------------------- live moves


def _move(sandbox: str, to: str, precopy: bool, on_state=None, verify: str = "sample") -> tuple:
    from datadir_mover.move import plan as planmod
    from datadir_mover.move.executor import Executor
    from tuner.core.sandbox import Sandbox

    spec = Sandbox.load(sandbox).connection_spec()
    plan = planmod.build(planmod.MoveRequest("datadir", to, precopy=precopy, probe=False, verify=verify), spec)
    ex = Executor.create(plan)
    if on_state:
        ex.on_state = on_state
    return ex, plan


def _datadir(sb) -> str:
    from tuner.core.server import inspect

    return inspect(sb.connection_spec()).datadir


@pytest.mark.root
def test_byte_flipped_on_target_before_switch_stops_the_move(clone, mv_tiers):
    sb = clone("mv-flip")
    home = _datadir(sb)
    target = os.path.join(mv_tiers["tmpfs"], "flip")
    flipped = {}

    def flip(state: str) -> None:
        if state == "VERIFY":  # after COPY wrote every file, before VERIFY reads them back
            p = Path(target, "tpcc", "stock.ibd")
            with open(p, "r+b") as fh:
                fh.seek(5 * 16384 + 100)
                b = fh.read(1)
                fh.seek(5 * 16384 + 100)
                fh.write(bytes([b[0] ^ 0x80]))
            flipped["at"] = str(p)

    ex, plan = _move(sb.name, target, precopy=False, on_state=flip)
    with pytest.raises(MoveError, match="VERIFY.*differs from its source.*rolled back"):
        ex.run()
    assert flipped, "the byte was never flipped"
    assert ex.journal.phase == "rolled_back" and not ex.journal.began("SWITCH")
    assert sb.state().value == "running"
    assert os.path.realpath(_datadir(sb)) == os.path.realpath(home), "the server was switched"
    assert not os.path.exists(target), "the bad copy was left behind"


class _Writer(threading.Thread):
    """Inserts numbered rows, one transaction each, reconnecting through the restart; remembers acknowledged ids."""

    def __init__(self, spec):
        super().__init__(daemon=True)
        self.spec = spec
        self.stop = threading.Event()
        self.acked: list[int] = []
        self.errors = 0

    def run(self) -> None:
        conn = None
        n = 0
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = self.spec.with_database(None).connect(connection_timeout=2)
                n += 1
                cur = conn.cursor()
                cur.execute("INSERT INTO mvw.rows (id, at) VALUES (%s, NOW(6))", (n,))
                conn.commit()
                self.acked.append(n)  # the server acknowledged the commit
            except Exception:
                self.errors += 1
                try:
                    conn and conn.close()
                except Exception:
                    pass
                conn = None
                time.sleep(0.05)


def _unequal_files(source: str, target: str) -> list[str]:
    """Files copied to ``target`` that differ from their source (whole-file digests, both read now)."""
    return [rel for rel, st in walk(target) if stat.S_ISREG(st.st_mode) and
            digest_file(os.path.join(target, rel), drop_cache=False) != digest_file(os.path.join(source, rel),
                                                                                     drop_cache=False)]


@pytest.mark.root
def test_writer_during_precopied_move_loses_no_committed_row(clone, mv_tiers):
    sb = clone("mv-writer")
    spec = sb.connection_spec()
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE mvw")
    cur.execute("CREATE TABLE mvw.rows (id INT PRIMARY KEY, at DATETIME(6)) ENGINE=InnoDB")
    conn.close()
    writer = _Writer(spec)
    writer.start()
    try:
        while len(writer.acked) < 50:
            time.sleep(0.05)
        target = os.path.join(mv_tiers["tmpfs"], "writer")
        ex, plan = _move(sb.name, target, precopy=True, on_state=lambda state: (
            state == "SWITCH" and unequal.extend(_unequal_files(plan.source_dir, target))))
        unequal: list[str] = []
        result = ex.run()
        time.sleep(0.5)  # a few commits on the new location too
    finally:
        writer.stop.set()
        writer.join(10)
    assert result["phase"] == "committed"
    assert len(result["precopy"]["passes"]) >= 2, result["precopy"]
    # the LSN rules read only part of the changed tablespaces and of the redo log; yet, with the server
    # stopped, every target file was byte for byte its source before the switch
    assert not unequal, f"copies that differ from their source after VERIFY: {unequal}"
    assert result["copy"]["files_delta"] >= 1, result["copy"]
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute("SELECT id FROM mvw.rows")
    present = {r[0] for r in cur.fetchall()}
    conn.close()
    lost = sorted(set(writer.acked) - present)
    assert not lost, f"{len(lost)} committed rows are missing after the move: {lost[:10]}"
    assert len(writer.acked) > 50 and writer.errors > 0, "the writer did not write across the restart"
    vs = result["verify_server"]
    assert vs["ok"] and vs["mode"] == "sample" and vs["write_statements_since_start"] >= 0
    proof = ex.prove()  # the stopped source hashed whole against the target's digests at the switch
    assert proof.status == "passed" and proof.how.startswith("hashing") and proof.bytes_done == proof.bytes_total, proof
    assert not ex.finalize(accept_volatile=True)["kept"]


@pytest.mark.root
def test_commit_waiting_on_the_block_at_the_stop_is_reported_not_damage(clone):
    """A commit that waits on the block when the stop begins may complete while the shutdown closes connections
    (the holder's among them): the check after the start reports the tables it changed as changed at the stop,
    because the mover counted the waiting commits as the stop began; it still calls a difference damage when none
    waited."""
    from datadir_mover.move import sample, verify

    sb = clone("mv-waitstop")
    spec = sb.connection_spec().with_database(None)
    admin = spec.connect()
    cur = admin.cursor()
    cur.execute("CREATE DATABASE mvs")
    cur.execute("CREATE TABLE mvs.t (id INT PRIMARY KEY) ENGINE=InnoDB")
    cur.execute("INSERT INTO mvs.t VALUES (1)")
    admin.close()
    holder = spec.connect()
    verify.block_writes(holder)
    before = sample.take(holder).digests
    writer = spec.connect(autocommit=False)
    writer.cursor().execute("INSERT INTO mvs.t VALUES (2)")
    outcome: list[str] = []

    def commit() -> None:
        try:
            writer.commit()
            outcome.append("committed")
        except Exception as exc:  # noqa: BLE001 - closed by the shutdown: rolled back
            outcome.append(f"failed: {exc}")

    t = threading.Thread(target=commit)
    t.start()
    deadline = time.monotonic() + 10
    while verify.waiting_on_the_block(holder) < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    waiting = verify.waiting_on_the_block(holder)
    assert waiting >= 1, "the commit did not wait on the block"
    sb.stop("clean")
    t.join(10)
    sb.start()
    conn = spec.connect()
    c = conn.cursor()
    c.execute("SELECT COUNT(*) FROM mvs.t")
    rows = c.fetchone()[0]
    conn.close()
    tolerant = verify.check_server(sb.connection_spec(), "datadir", sb.datadir, before, "sample",
                                   waiting_at_stop=waiting)
    strict = verify.check_server(sb.connection_spec(), "datadir", sb.datadir, before, "sample")
    assert tolerant.ok and tolerant.commits_waiting_at_stop == waiting
    if rows == 2:  # the waiting commit completed during the shutdown: a difference no copy made
        assert tolerant.changed_at_stop and not strict.ok, (outcome, strict.to_dict())
    else:  # it was rolled back: nothing differs
        assert rows == 1 and strict.ok and not tolerant.changed_at_stop, outcome


@pytest.mark.root
def test_preflush_before_the_stop_is_undone_when_the_stop_fails(clone, mv_tiers, monkeypatch):
    """The pre-flush lowers the dirty-page limits before the stop; a failed stop puts the server's own values back."""
    from datadir_mover.move import preflush
    from datadir_mover.move.control import SandboxControl
    from tuner.core.errors import SandboxError

    sb = clone("mv-flush")
    spec = sb.connection_spec()
    conn = spec.with_database(None).connect()
    original = preflush.read_settings(conn)
    cur = conn.cursor()
    cur.execute("UPDATE tpcc.stock SET s_quantity = s_quantity + 1")  # every stock page dirty
    conn.commit()
    monkeypatch.setattr(preflush, "ENOUGH_BYTES", 0)  # flush down to the last page
    seen = {}

    def failing_stop(self, mode):
        c = spec.with_database(None).connect()
        seen.update(preflush.read_settings(c), dirty=preflush.dirty_pages(c))
        c.close()
        raise SandboxError("simulated failure of the stop")

    monkeypatch.setattr(SandboxControl, "stop", failing_stop)
    ex, _ = _move(sb.name, os.path.join(mv_tiers["tmpfs"], "flush"), precopy=False)
    with pytest.raises(MoveError, match="failed in SHUTDOWN.*simulated failure of the stop.*rolled back"):
        ex.run()
    assert float(seen["innodb_max_dirty_pages_pct"]) == 0.0 and float(seen["innodb_max_dirty_pages_pct_lwm"]) == 0
    assert int(seen["innodb_io_capacity"]) > int(original["innodb_io_capacity"])
    assert sb.state().value == "running" and ex.journal.phase == "rolled_back"
    assert preflush.read_settings(conn) == original, "the pre-flush settings were left on the server"
    conn.close()


# ---------------------------------------------------------------- page LSNs (the offline delta of a tablespace)

PAGE = 16384


def _tablespace(path: Path, pages: int, lsn: int, flags: int = cp.FSP_FLAGS_FCRC32_MARKER) -> None:
    """A file shaped like an InnoDB tablespace: random pages, each stamped with ``lsn``; page 0 carries ``flags``."""
    with open(path, "wb") as fh:
        for p in range(pages):
            page = bytearray(os.urandom(PAGE))
            page[cp.FIL_PAGE_LSN:cp.FIL_PAGE_LSN + 8] = lsn.to_bytes(8, "big")
            if p == 0:
                page[cp.FSP_SPACE_FLAGS:cp.FSP_SPACE_FLAGS + 4] = flags.to_bytes(4, "big")
            fh.write(page)


def _write_page(path: Path, page_no: int, lsn: int) -> None:
    page = bytearray(os.urandom(PAGE))
    page[cp.FIL_PAGE_LSN:cp.FIL_PAGE_LSN + 8] = lsn.to_bytes(8, "big")
    with open(path, "r+b") as fh:
        fh.seek(page_no * PAGE)
        fh.write(page)


@pytest.mark.parametrize("flags,reads_all", [(cp.FSP_FLAGS_FCRC32_MARKER, False), (4 << 1, True)],
                         ids=["full_crc32", "row_format_compressed"])
def test_offline_delta_reads_only_blocks_with_pages_written_since_the_pass(tmp_path, flags, reads_all):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "db").mkdir(parents=True)
    dst.mkdir()
    ts = src / "db" / "t.ibd"
    _tablespace(ts, 400, lsn=500, flags=flags)  # 100 blocks of 4 pages
    _age(ts)
    first, _ = copy_tree(src, dst, walk(src), lsn_floor=1000)  # the checkpoint was at 1000 when the pass began
    _trust_timestamps(first)
    assert first.records["db/t.ibd"].lsn_floor == 1000
    _write_page(ts, 41, lsn=2000)  # the server flushes one page after the pass (block 10), then stops
    read = []
    final, st = copy_tree(src, dst, walk(src), previous=first, verify=False, page_size=PAGE, progress=read.append)
    assert st.files_delta == 1 and st.bytes_copied == BLOCK  # block 10 rewritten
    assert (dst / "db" / "t.ibd").read_bytes() == ts.read_bytes()
    if reads_all:  # ROW_FORMAT=COMPRESSED pages are smaller than the server's: no LSN shortcut
        assert sum(read) == 400 * PAGE
    else:  # block 0 (header page), block 10, and the last block: 3 of 100 read
        assert sum(read) == 3 * BLOCK
    assert final.records["db/t.ibd"].digest == digest_file(str(ts))


def _copied_tablespace(tmp_path: Path):
    """(src, dst, tablespace, manifest): a 400-page tablespace at LSN 500 copied by a pass whose floor was 1000."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "db").mkdir(parents=True)
    dst.mkdir()
    ts = src / "db" / "t.ibd"
    _tablespace(ts, 400, lsn=500)
    _age(ts)
    first, _ = copy_tree(src, dst, walk(src), lsn_floor=1000)
    _trust_timestamps(first)
    return src, dst, ts, first


def test_offline_delta_reads_blocks_whose_headers_left_the_page_cache_whole(tmp_path):
    """A page the server wrote with O_DIRECT is no longer cached: its block is read whole, no header read first."""
    src, dst, ts, first = _copied_tablespace(tmp_path)
    _write_page(ts, 41, lsn=2000)
    fd = os.open(ts, os.O_RDONLY)
    try:
        os.fsync(fd)
        lsns = cp.resident_page_lsns(fd, 400 * PAGE, PAGE)
        assert lsns is not None and lsns[41] == 2000 and lsns[0] == 500  # cached: headers read in place
        os.posix_fadvise(fd, 80 * PAGE, 8 * PAGE, os.POSIX_FADV_DONTNEED)  # blocks 20 and 21 leave the cache
        lsns = cp.resident_page_lsns(fd, 400 * PAGE, PAGE)
        assert lsns[80:88] == [None] * 8 and lsns[79] == 500 and lsns[88] == 500
    finally:
        os.close(fd)
    read = []
    final, st = copy_tree(src, dst, walk(src), previous=first, verify=False, page_size=PAGE, progress=read.append)
    assert sum(read) == 5 * BLOCK  # header block, block 10 (new LSN), blocks 20-21 (not cached), the last block
    assert st.bytes_copied == BLOCK and (dst / "db" / "t.ibd").read_bytes() == ts.read_bytes()
    assert final.records["db/t.ibd"].digest == digest_file(str(ts))


def test_online_pass_reads_only_stale_blocks_and_moves_only_their_floors(tmp_path):
    """An online pass re-reads the blocks with pages at or above their floor; the offline delta then uses per-block
    floors, so a page written after the first pass but below the second pass's floor is still found."""
    src, dst, ts, first = _copied_tablespace(tmp_path)
    _write_page(ts, 41, lsn=2000)  # block 10, written after pass 1
    read = []
    second, st = copy_tree(src, dst, walk(src), previous=first, lsn_floor=3000, page_size=PAGE,
                           progress=read.append)  # the online pass 2: its checkpoint floor is 3000
    assert sum(read) == 3 * BLOCK and st.bytes_copied == BLOCK  # header block, block 10, last block
    floors = second.floors["db/t.ibd"]
    assert floors[10] == 3000 and floors[50] == 1000 and second.records["db/t.ibd"].lsn_floor == 1000
    _trust_timestamps(second)
    _write_page(ts, 200, lsn=2500)  # block 50: written during pass 2, LSN below pass 2's floor
    read = []
    final, st = copy_tree(src, dst, walk(src), previous=second, verify=False, page_size=PAGE, progress=read.append)
    assert sum(read) == 3 * BLOCK  # header block, block 50 (floor 1000), last block; block 10 not again
    assert (dst / "db" / "t.ibd").read_bytes() == ts.read_bytes()
    assert final.records["db/t.ibd"].digest == digest_file(str(ts))


@pytest.mark.root
def test_delta_onto_memory_reads_only_the_stale_pages_of_a_block(mv_tiers, tmp_path):
    """Onto tmpfs, a block with one stale page reads that page from the source and its other three from the
    target copy; a page that left the page cache is read as well; the result is byte-equal and read back."""
    src = tmp_path / "src"
    (src / "db").mkdir(parents=True)
    dst = Path(mv_tiers["tmpfs"]) / "by-page"
    dst.mkdir()
    try:
        ts = src / "db" / "t.ibd"
        _tablespace(ts, 400, lsn=500)
        _age(ts)
        first, _ = copy_tree(src, dst, walk(src), lsn_floor=1000)
        _trust_timestamps(first)
        _write_page(ts, 41, lsn=2000)  # block 10, its second page
        _write_page(ts, 82, lsn=2000)  # block 20, its third page
        fd = os.open(ts, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 83 * PAGE, PAGE, os.POSIX_FADV_DONTNEED)  # block 20's fourth page leaves the cache
        finally:
            os.close(fd)
        read = []
        final, st = copy_tree(src, dst, walk(src), previous=first, page_size=PAGE, progress=read.append)
        # the header block and the last block whole, then pages 41, 82 and 83 alone
        assert sum(read) == 2 * BLOCK + 3 * PAGE
        assert st.files_delta == 1 and st.bytes_copied == 2 * BLOCK  # blocks 10 and 20 rewritten (and read back)
        assert (dst / "db" / "t.ibd").read_bytes() == ts.read_bytes()
        assert final.records["db/t.ibd"].digest == digest_file(str(ts))
        assert final.records["db/t.ibd"].verified
    finally:
        import shutil

        shutil.rmtree(dst)


def test_prefetch_asks_for_the_stale_pages_joined_into_runs(monkeypatch):
    calls = []
    monkeypatch.setattr(cp.os, "posix_fadvise", lambda fd, off, n, advice: calls.append((off, n, advice)))
    # block 0 whole; block 1 pages 1-2; block 2 page 0; block 5 page 3
    cp._prefetch(7, {0: 0b1111, 1: 0b0110, 2: 0b0001, 5: 0b1000}, PAGE, 100 * BLOCK)
    will = cp.os.POSIX_FADV_WILLNEED
    assert calls == [(0, BLOCK, will), (BLOCK + PAGE, 2 * PAGE, will), (2 * BLOCK, PAGE, will),
                     (5 * BLOCK + 3 * PAGE, PAGE, will)]
    calls.clear()
    cp._prefetch(7, frozenset({3, 4, 9}), 0, 9 * BLOCK + 100)  # whole blocks; the last one ends with the file
    assert calls == [(3 * BLOCK, 2 * BLOCK, will), (9 * BLOCK, 100, will)]


def test_page_runs_of_a_mask():
    assert cp._page_runs(0b0000, 4) == []
    assert cp._page_runs(0b1011, 4) == [(0, 2), (3, 4)]
    assert cp._page_runs(0b0110, 4) == [(1, 3)]
    assert cp._page_runs(0b1111, 4) == [(0, 4)]


def test_page_lsns_read_one_by_one_or_sequentially_agree(tmp_path):
    ts = tmp_path / "t.ibd"
    _tablespace(ts, 1000, lsn=7)
    for p, lsn in ((0, 11), (513, 99), (999, 5)):
        _write_page(ts, p, lsn)
    fd = os.open(ts, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        cached = cp.page_lsns(fd, size, PAGE, cached=True)  # one header read per page
        sequential = cp.page_lsns(fd, size, PAGE, cached=False)  # 8 MiB reads
        probed = cp.page_lsns(fd, size, PAGE)  # either, by the timed probe
    finally:
        os.close(fd)
    assert cached == sequential == probed and len(cached) == 1000
    assert (cached[0], cached[513], cached[999], cached[1]) == (11, 99, 5, 7)


# ---------------------------------------------------------------- the redo log's offline delta

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
        for a, b in cp._redo_ranges(lsn, lsn + n, 12288, LOG_SIZE):
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
    _age(log)
    first, _ = copy_tree(src, dst, walk(src), log_floor=floor)
    _trust_timestamps(first)
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
    _trust_timestamps(final)
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
