"""The copy at scale: block deltas between passes, holes kept through every path, read-back from the medium,
a flipped byte caught before the switch, and a writer that loses no committed row across a pre-copied move.

Unit parts run on files under pytest's tmp_path (the root file system: O_DIRECT read-back) and on
the session's real tmpfs (read-back of memory); the live parts move a clone of the golden sandbox.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import mvhelpers

from copyhelpers import RowWriter, age, move, trust_timestamps, unequal_files
from datadir_mover.move import copy as cp
from datadir_mover.move.copy import BLOCK, PIECE, copy_tree, digest_file, walk
from datadir_mover.move.copy import blocks as blocks_mod
from waiting import wait_for
from tuner.core.errors import MoveError



# ---------------------------------------------------------------- deltas between passes


def test_changed_file_is_copied_again_only_its_changed_blocks(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "hot.ibd").write_bytes(os.urandom(200 * BLOCK + 123))  # several 8 MiB chunks and a partial last block
    (src / "cold.ibd").write_bytes(os.urandom(3 * BLOCK))
    for f in ("hot.ibd", "cold.ibd"):
        age(src / f)
    first, st1 = copy_tree(src, dst, walk(src))
    assert st1.files_copied == 2 and st1.files_delta == 0
    trust_timestamps(first)

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
    age(src / "f")
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
    trust_timestamps(first)
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
    age(src / "ibdata1")
    m, _ = copy_tree(src, dst, walk(src))
    s, d = os.stat(src / "ibdata1"), os.stat(dst / "ibdata1")
    assert d.st_size == s.st_size and d.st_blocks * 512 <= s.st_blocks * 512 + (1 << 20), "holes were filled"
    assert m.records["ibdata1"].digest == digest_file(str(dst / "ibdata1"))
    # a later pass that changes one data block keeps the rest of the holes
    trust_timestamps(m)
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
    age(log)
    real = blocks_mod.data_extents

    def stale_map(fd, start, end):  # the map says hole after 1 MiB + 4 KiB, but the server has just written there
        got = real(fd, start, end)
        with open(log, "r+b") as fh:
            fh.seek((1 << 20) + 65536)
            fh.write(b"\x5a" * 4096)
        return got

    monkeypatch.setattr(blocks_mod, "data_extents", stale_map)
    first, _ = copy_tree(src, dst, walk(src))  # verified: the digest covers the hole as copied
    monkeypatch.setattr(blocks_mod, "data_extents", real)
    assert first.records["ib_logfile0"].verified
    trust_timestamps(first)
    first.records["ib_logfile0"].mtime_ns -= 1  # the server's write changed the file after the pass read it
    second, st = copy_tree(src, dst, walk(src), previous=first)
    assert st.files_delta == 1 and (dst / "ib_logfile0").read_bytes() == log.read_bytes()


@pytest.mark.root
def test_copy_to_tmpfs_reads_back_and_catches_a_flip(mv_tiers, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.ibd").write_bytes(os.urandom((PIECE * 2) + 777))  # two pieces in parallel and a tail
    (src / "b.ibd").write_bytes(os.urandom(12345))
    mvhelpers.write_sparse(src / "ibdata1", PIECE + (8 << 20), [(0, os.urandom(1 << 20)),
                                                                      (PIECE + 4096, os.urandom(8192))])
    dst = Path(mv_tiers["tmpfs"]) / "copy-scale"
    dst.mkdir()
    try:
        assert cp.on_memory_fs(dst)
        m, _ = copy_tree(src, dst, walk(src), verify=False, stable=True)
        assert os.stat(dst / "ibdata1").st_blocks * 512 < 4 << 20, "holes were filled on the tmpfs"
        cp.verify_tree(m)  # the read-back of the tmpfs agrees with the source
        assert os.stat(dst / "ibdata1").st_blocks * 512 < 4 << 20, "the read-back filled the holes"
        assert (dst / "a.ibd").read_bytes() == (src / "a.ibd").read_bytes()
        for rec in m.records.values():
            rec.verified = False
        with open(dst / "a.ibd", "r+b") as fh:  # one byte, in the second piece
            fh.seek(PIECE + 4242)
            b = fh.read(1)
            fh.seek(PIECE + 4242)
            fh.write(bytes([b[0] ^ 0x01]))
        with pytest.raises(MoveError, match="differs from its source"):
            cp.verify_tree(m)
    finally:
        import shutil

        shutil.rmtree(dst)


# ---------------------------------------------------------------- live moves


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

    ex, plan = move(sb.name, "datadir", target, precopy=False, on_state=flip)
    with pytest.raises(MoveError, match="VERIFY.*differs from its source.*rolled back"):
        ex.run()
    assert flipped, "the byte was never flipped"
    assert ex.journal.phase == "rolled_back" and not ex.journal.began("SWITCH")
    assert sb.state().value == "running"
    assert os.path.realpath(_datadir(sb)) == os.path.realpath(home), "the server was switched"
    assert not os.path.exists(target), "the bad copy was left behind"


@pytest.mark.root
def test_writer_during_precopied_move_loses_no_committed_row(clone, mv_tiers):
    sb = clone("mv-writer")
    spec = sb.connection_spec()
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE mvw")
    cur.execute("CREATE TABLE mvw.rows (id INT PRIMARY KEY, at DATETIME(6)) ENGINE=InnoDB")
    conn.close()
    writer = RowWriter(spec, "mvw.rows")
    writer.start()
    try:
        wait_for(lambda: len(writer.acked) >= 50, 60, "50 rows committed before the move")
        target = os.path.join(mv_tiers["tmpfs"], "writer")
        ex, plan = move(sb.name, "datadir", target, precopy=True, on_state=lambda state: (
            state == "SWITCH" and unequal.extend(unequal_files(plan.source_dir, target))))
        unequal: list[str] = []
        result = ex.run()
        at_start = len(writer.acked)
        wait_for(lambda: len(writer.acked) >= at_start + 10, 60, "10 commits on the new location")
    finally:
        writer.stop.set()
        writer.join(10)
    assert result.phase == "committed"
    assert len(result.precopy.passes) >= 2, result.precopy
    # the LSN rules read only part of the changed tablespaces and of the redo log; yet, with the server
    # stopped, every target file was byte for byte its source before the switch
    assert not unequal, f"copies that differ from their source after VERIFY: {unequal}"
    assert result.copy.files_delta >= 1, result.copy
    conn = spec.with_database(None).connect()
    cur = conn.cursor()
    cur.execute("SELECT id FROM mvw.rows")
    present = {r[0] for r in cur.fetchall()}
    conn.close()
    lost = sorted(set(writer.acked) - present)
    assert not lost, f"{len(lost)} committed rows are missing after the move: {lost[:10]}"
    vs = result.verify_server
    assert vs.ok and vs.mode == "sample" and vs.row_writes_since_start >= 0
    proof = ex.prove()  # the stopped source hashed whole against the target's digests at the switch
    assert proof.status == "passed" and proof.how.startswith("hashing") and proof.bytes_done == proof.bytes_total, proof
    assert not ex.finalize(accept_volatile=True).kept


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
    ex, _ = move(sb.name, "datadir", os.path.join(mv_tiers["tmpfs"], "flush"), precopy=False)
    with pytest.raises(MoveError, match="failed in SHUTDOWN.*simulated failure of the stop.*rolled back"):
        ex.run()
    assert float(seen["innodb_max_dirty_pages_pct"]) == 0.0 and float(seen["innodb_max_dirty_pages_pct_lwm"]) == 0
    assert int(seen["innodb_io_capacity"]) > int(original["innodb_io_capacity"])
    assert sb.state().value == "running" and ex.journal.phase == "rolled_back"
    assert preflush.read_settings(conn) == original, "the pre-flush settings were left on the server"
    conn.close()
