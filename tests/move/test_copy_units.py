"""The copy on its own, on small trees: holes, owner, mode and mtime kept, a corrupted copy caught, a delta pass,
the manifest's round trip."""

from __future__ import annotations

import os
import time

import pytest

import mvhelpers

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
