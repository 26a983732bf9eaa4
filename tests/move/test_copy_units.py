"""The copy on its own, on small trees: holes, owner, mode and mtime kept, a corrupted copy caught, a delta pass,
the manifest's round trip."""

from __future__ import annotations

import os
import time

import pytest

import mvhelpers

from datadir_mover.move.copy import blocks
from datadir_mover.move.copy import file as file_mod
from datadir_mover.move.copy import RACY_MARGIN_NS, Manifest, copy_tree, digest_file, recheck_sources, verify_tree, walk
from tuner.core.errors import MoveError


def test_copy_keeps_holes_owner_mode_and_verifies(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "db").mkdir(parents=True)
    mvhelpers.write_sparse(src / "ibdata1", 64 << 20, [(0, os.urandom(1 << 20)), (40 << 20, os.urandom(4096))])
    (src / "db" / "t.ibd").write_bytes(os.urandom(300_000))
    os.chmod(src / "db" / "t.ibd", 0o640)
    os.chown(src / "db" / "t.ibd", 65534, 65534)
    os.symlink("t.ibd", src / "db" / "link")
    dst.mkdir()
    manifest, stats = copy_tree(src, dst, walk(src), stable=True)
    assert stats.files_copied == 2 and all(r.verified for r in manifest.records.values())
    s, d = os.stat(src / "ibdata1"), os.stat(dst / "ibdata1")
    assert d.st_size == s.st_size and d.st_blocks * 512 < 8 << 20, "holes were filled"
    assert digest_file(str(src / "ibdata1")) == digest_file(str(dst / "ibdata1"))
    t = os.stat(dst / "db" / "t.ibd")
    assert (t.st_uid, t.st_gid, t.st_mode & 0o777) == (65534, 65534, 0o640)
    assert t.st_mtime_ns == os.stat(src / "db" / "t.ibd").st_mtime_ns
    assert os.readlink(dst / "db" / "link") == "t.ibd"


def test_verify_catches_a_corrupted_copy(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "f").write_bytes(os.urandom(100_000))
    manifest, _ = copy_tree(src, dst, walk(src), verify=False)
    with open(dst / "f", "r+b") as fh:
        fh.seek(5000)
        fh.write(b"\x00\x01")
    with pytest.raises(MoveError, match="differs from its source"):
        verify_tree(manifest)


def test_delta_pass_recopies_changed_and_racy_files_only(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    for name in ("cold", "hot", "gone"):
        (src / name).write_bytes(os.urandom(50_000))
    old = time.time_ns() - 10 * RACY_MARGIN_NS
    os.utime(src / "cold", ns=(old, old))
    os.utime(src / "hot", ns=(old, old))
    os.utime(src / "gone", ns=(old, old))
    # ctime cannot be set back; pretend the pre-copy read them much later than any change
    pre, _ = copy_tree(src, dst, walk(src))
    for rec in pre.records.values():
        rec.read_at_ns += 10 * RACY_MARGIN_NS
    (src / "hot").write_bytes(os.urandom(50_000))
    (src / "gone").unlink()
    final, stats = copy_tree(src, dst, walk(src), previous=pre)
    assert stats.files_skipped == 1 and stats.files_copied == 1 and stats.files_removed == 1
    assert not (dst / "gone").exists()
    assert digest_file(str(dst / "hot")) == digest_file(str(src / "hot"))
    assert recheck_sources(final) == []
    # a file modified just before the pre-copy read it is "racily clean": copied again
    racy, _ = copy_tree(src, dst, walk(src))
    again, st2 = copy_tree(src, dst, walk(src), previous=racy)
    assert st2.files_skipped == 0


def test_manifest_round_trip(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("x")
    (tmp_path / "b").mkdir()
    m, _ = copy_tree(tmp_path / "a", tmp_path / "b", walk(tmp_path / "a"))
    assert Manifest.from_dict(m.to_dict()).to_dict() == m.to_dict()


# ---------------------------------------------------------------- an extent map that lies

MiB = 1 << 20


def _lying_map(real, lo: int, hi: int):
    """SEEK_DATA/SEEK_HOLE as ``real`` reports them, but with [lo, hi) reported as a hole."""

    def extents(fd, start, end):
        out = []
        for a, b in real(fd, start, end):
            out += [(a, min(b, lo))] if a < lo else []
            out += [(max(a, hi), b)] if b > hi else []
        return out

    return extents


def _all_data(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "ibdata1").write_bytes(os.urandom(3 * MiB))  # data everywhere, no hole
    return src, dst


def test_offline_copy_copies_data_the_extent_map_calls_a_hole(tmp_path, monkeypatch):
    """Fault injected: the file system's extent map reports [1 MiB, 2 MiB) of a stopped source as a hole.  The copy
    reads it all the same, finds it is not zeros and writes it."""
    src, dst = _all_data(tmp_path)
    monkeypatch.setattr(blocks, "data_extents", _lying_map(blocks.data_extents, MiB, 2 * MiB))
    with open(src / "ibdata1", "rb") as fh:
        assert blocks.data_extents(fh.fileno(), 0, 3 * MiB) == [(0, MiB), (2 * MiB, 3 * MiB)]
    m, _ = copy_tree(src, dst, walk(src), stable=True)
    assert (dst / "ibdata1").read_bytes() == (src / "ibdata1").read_bytes()
    assert m.records["ibdata1"].verified and m.records["ibdata1"].digest == digest_file(str(src / "ibdata1"))


def test_read_back_catches_a_copy_that_trusted_a_lying_extent_map(tmp_path, monkeypatch):
    """Fault injected twice: the map lies, and the copy is made to believe it (the unwritten range stays a hole on the
    target).  The source's digest is of what was read, the read-back reads the target's hole as zeros: caught."""
    src, dst = _all_data(tmp_path)
    monkeypatch.setattr(blocks, "data_extents", _lying_map(blocks.data_extents, MiB, 2 * MiB))
    monkeypatch.setattr(file_mod, "_nonzero_gaps", lambda data, c, ce, extents: [])
    with pytest.raises(MoveError, match="differs from its source"):
        copy_tree(src, dst, walk(src), stable=True)


def test_read_back_reads_what_the_target_map_calls_a_hole(tmp_path, monkeypatch):
    """A flipped byte in a range the target's extent map reports as a hole is still read back, and caught."""
    src, dst = _all_data(tmp_path)
    m, _ = copy_tree(src, dst, walk(src), verify=False, stable=True)
    with open(dst / "ibdata1", "r+b") as fh:
        fh.seek(MiB + 4242)
        fh.write(b"\xff\x00")
    monkeypatch.setattr(blocks, "data_extents", lambda fd, start, end: [])  # "all of it is a hole"
    with pytest.raises(MoveError, match="differs from its source"):
        verify_tree(m)
