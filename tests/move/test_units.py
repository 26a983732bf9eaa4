"""The mover's parts on their own: journal semantics, verified sparse copies, placement files, AppArmor rules."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

import mvhelpers

from datadir_mover import apparmor
from datadir_mover.move import placement
from datadir_mover.move.copy import (RACY_MARGIN_NS, Manifest, copy_tree, digest_file, recheck_sources,
                                     verify_tree, walk)
from datadir_mover.move.journal import Journal
from tuner.core.errors import MoveError

# ---------------------------------------------------------------- journal


def test_journal_resume_points_and_torn_tail(tmp_path):
    j = Journal.create(tmp_path / "m", {"move_id": "m"})
    assert j.next_state() == "PLAN"
    j.begin("PLAN")
    j.finish("PLAN")
    j.begin("PRECOPY")
    assert j.next_state() == "PRECOPY"  # begun, not done: run it again
    j.finish("PRECOPY")
    assert j.next_state() == "SHUTDOWN"
    with open(j.path, "a") as fh:  # a crash tore the next record
        fh.write('{"state": "SHUTDOWN", "ev')
    assert [r.state for r in j.records()] == ["PLAN", "PLAN", "PRECOPY", "PRECOPY"]
    assert j.next_state() == "SHUTDOWN" and j.phase == "open"
    assert "resume" in j.describe()


def test_journal_phases(tmp_path):
    j = Journal.create(tmp_path / "m", {"move_id": "m"})
    for s in ("PLAN", "PRECOPY", "SHUTDOWN", "COPY", "VERIFY", "SWITCH", "START", "VERIFY_SERVER", "COMMIT"):
        j.begin(s)
        j.finish(s)
    assert j.phase == "committed" and j.next_state() is None
    j.begin("FINALIZE")
    assert j.phase == "committed" and "finalize was interrupted" in j.describe()
    j.finish("FINALIZE")
    assert j.phase == "finalized"


def test_journal_lock_is_exclusive(tmp_path):
    j = Journal.create(tmp_path / "m", {"move_id": "m"})
    j.lock()
    try:
        with pytest.raises(MoveError, match="another innotier process"):
            Journal(tmp_path / "m").lock()
    finally:
        j.unlock()
    Journal(tmp_path / "m").lock()


# ---------------------------------------------------------------- copy



@pytest.mark.parametrize("stable", [False, True], ids=["online", "stopped-source"])
def test_copy_keeps_holes_owner_mode_and_verifies(tmp_path, stable):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "db").mkdir(parents=True)
    mvhelpers.write_sparse(src / "ibdata1", 64 << 20, [(0, os.urandom(1 << 20)), (40 << 20, os.urandom(4096))])
    (src / "db" / "t.ibd").write_bytes(os.urandom(300_000))
    os.chmod(src / "db" / "t.ibd", 0o640)
    os.chown(src / "db" / "t.ibd", 65534, 65534)
    os.symlink("t.ibd", src / "db" / "link")
    dst.mkdir()
    manifest, stats = copy_tree(src, dst, walk(src), stable=stable)
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


# ---------------------------------------------------------------- placement file (golden)

GOLDEN_PLACEMENT = """# Generated by innotier (`innotier move`); do not edit by hand.
# Where InnoDB components live; `innotier move status` lists the moves that wrote it.
[mysqld]
innodb_log_group_home_dir = /mnt/zram/redo
tmpdir = /dev/shm/mysql-tmp
"""


def test_placement_render_is_deterministic_and_merges():
    first = placement.with_option(None, "tmpdir", "/dev/shm/mysql-tmp")
    both = placement.with_option(first, "innodb_log_group_home_dir", "/mnt/zram/redo")
    assert both == GOLDEN_PLACEMENT
    assert placement.parse(both) == {"innodb_log_group_home_dir": "/mnt/zram/redo", "tmpdir": "/dev/shm/mysql-tmp"}
    assert placement.with_option(both, "tmpdir", "/tmp") != both


# ---------------------------------------------------------------- AppArmor

MYSQLD_PROFILE = """#include <tunables/global>

/usr/sbin/mysqld {
  #include <abstractions/base>
  #include <abstractions/nameservice>
  #include <abstractions/mysql>

  capability dac_override,
  capability setgid,
  capability setuid,
  network tcp,

  /etc/mysql/** r,
  /usr/sbin/mysqld mr,
  /var/lib/mysql/ r,
  /var/lib/mysql/** rwk,
  /run/mysqld/mysqld.pid rw,
  /run/mysqld/mysqld.sock rw,

  #include <local/usr.sbin.mysqld>
}
"""


@pytest.fixture
def aa_root(tmp_path):
    root = tmp_path / "apparmor.d"
    shutil.copytree("/etc/apparmor.d", root, symlinks=True, ignore=shutil.ignore_patterns("cache"))
    for name in ("usr.sbin.mariadbd", "usr.sbin.mysqld"):
        (root / name).unlink(missing_ok=True)
    (root / "local").mkdir(exist_ok=True)
    return root


def test_apparmor_mysqld_profile_rules_validated_applied_removed(aa_root, tmp_path):
    (aa_root / "usr.sbin.mysqld").write_text(MYSQLD_PROFILE)
    (aa_root / "local" / "usr.sbin.mysqld").write_text("# site rules\n  /srv/backup/ r,\n")
    no_aa = tmp_path / "sys"  # a kernel without AppArmor
    no_aa.mkdir()
    change = apparmor.plan_change(["/mnt/zram/mysql", "/mnt/my data"], "mysql", "m-1", str(aa_root), str(no_aa))
    assert change.action == "write" and change.profile.endswith("usr.sbin.mysqld")
    assert '  "/mnt/my data/**" rwk,' in change.rules and "  /mnt/zram/mysql/ r," in change.rules
    apparmor.validate(change, str(aa_root))
    apparmor.apply(change)
    local = (aa_root / "local" / "usr.sbin.mysqld").read_text()
    assert local.startswith("# site rules") and "# BEGIN innotier m-1" in local
    apparmor.apply(change)  # idempotent
    assert (aa_root / "local" / "usr.sbin.mysqld").read_text() == local
    # the whole profile with the include parses (no kernel load)
    r = subprocess.run(["apparmor_parser", "-Q", "-K", "--base", str(aa_root), "-I", str(aa_root),
                        str(aa_root / "usr.sbin.mysqld")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    apparmor.remove(change)
    assert (aa_root / "local" / "usr.sbin.mysqld").read_text() == "# site rules\n  /srv/backup/ r,\n"


def test_apparmor_rejects_bad_rules_and_explains_empty_profile(aa_root, tmp_path):
    (aa_root / "usr.sbin.mariadbd").write_text("# This file is intentionally empty to disable apparmor by default\n")
    change = apparmor.plan_change(["/mnt/x"], "mariadb", "m-2", str(aa_root), str(tmp_path))
    assert change.action == "none" and "intentionally empty" in change.reason
    apparmor.validate(change, str(aa_root))  # rules still proven in a minimal profile
    change.rules = change.rules.replace("rwk", "rwzz")
    with pytest.raises(MoveError, match="apparmor_parser rejected"):
        apparmor.validate(change, str(aa_root))
    (aa_root / "usr.sbin.mariadbd").unlink()
    assert apparmor.plan_change(["/mnt/x"], "mariadb", "m-3", str(aa_root), str(tmp_path)).action == "none"


def test_selinux_commands():
    from datadir_mover import selinux

    cmds = selinux.commands("datadir", "/mnt/pm em/mysql", "tmpfs")
    assert cmds[0] == "semanage fcontext -a -t mysqld_db_t '/mnt/pm em/mysql(/.*)?'"
    assert cmds[1] == "restorecon -Rv '/mnt/pm em/mysql'"
    assert "context=system_u:object_r:mysqld_db_t:s0" in cmds[2]
    assert selinux.commands("tmpdir", "/x")[0].startswith("semanage fcontext -a -t mysqld_tmp_t")


def test_precopy_passes_stop_when_the_delta_stops_shrinking():
    from datadir_mover.move.precopy_steps import PRECOPY_ENOUGH_S, PRECOPY_MAX_PASSES, _converged

    def p(*seconds):
        return [{"seconds": s} for s in seconds]

    assert not _converged(p())  # the first pass of a regime always runs
    assert not _converged(p(30.0))
    assert _converged(p(30.0, PRECOPY_ENOUGH_S / 2))  # short enough: the offline delta will be small
    assert not _converged(p(30.0, 6.0))  # shrinking fast: another pass pays
    assert _converged(p(30.0, 6.0, 5.5))  # not 0.8x of the one before: the write rate holds the delta
    assert _converged(p(*[40.0 / 2 ** i for i in range(PRECOPY_MAX_PASSES)]))  # enough passes
