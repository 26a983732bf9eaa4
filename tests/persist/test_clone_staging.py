"""A CLONE written by the server's own user, taken over by root (datadir_mover/persist/clone_staging.py).

A real MySQL 9.7 sandbox runs as a real unprivileged user (``persist-clone``, made for this module and removed
after), as Debian's mysql.service runs as ``mysql``: its CLONE can only write what that user may write.

- a sync goes through ``<backing>/clone-staging`` (the user's, 0700): the generation is root's (directories
  0700, files 0600), the staging directory is empty after, the copy restores and the server starts on it;
- a backing directory of the DBA's that the server's user cannot pass: install refuses in one line, nothing made;
- the fault: CLONE fails midway (the backing file system runs out of inodes after the clone's first files):
  one line, no generation flipped, the current one byte for byte as it was, the staging directory empty;
- the fault: links the server's user plants (in the clone, in place of the clone, left in the staging
  directory) are refused or removed, never followed: a root-owned canary outside is unchanged;
- AppArmor: the rule for the staging directory goes in the local include of Debian sid's usr.sbin.mysqld (the
  recorded profile; parsed by the real apparmor_parser, never loaded), and uninstall takes it out again; a
  profile without a local include is refused in one line naming the rule, nothing written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

import mvhelpers
from sqlhelpers import execute
from datadir_mover.move.copy import safe_fs, walk
from datadir_mover.persist import clone_staging, confinement
from datadir_mover.persist.config import PersistConfig
from datadir_mover.persist.locations import Locations
from tuner.core.errors import TierError

USER = "persist-clone"
NAME = "persist-clone97"
MYSQL_PROFILE = "sid-mysql-server-9.7.4-2.usr.sbin.mysqld"


@pytest.fixture(scope="module")
def server_user():
    with mvhelpers.system_user(USER) as entry:
        yield entry


@pytest.fixture(scope="module")
def box(installed_server, innotier_home, server_user):
    """A MySQL 9.7 sandbox with the clone plugin, its datadir on a tmpfs tier, run as ``persist-clone``; the
    backing on a tmpfs of its own (its inodes limited for the fault)."""
    from tuner.core import sandbox as sbx
    from tuner.core.sandbox.config import write_cnf

    installed_server("mysql-9.7")
    home = Path(innotier_home)
    os.chmod(home, 0o711)   # the server's user passes through to its sandbox directory (lists nothing)
    tier, backing_fs = str(home / "cs-tier"), str(home / "cs-backing-fs")
    mvhelpers.mount_tmpfs(tier, "512M")
    mvhelpers.mount_tmpfs(backing_fs, "512M")
    sb = sbx.create(NAME, page_size="16k", server="mysql-9.7", datadir=os.path.join(tier, "mysql"),
                    options={"innodb_buffer_pool_size": "64M", "innodb_redo_log_capacity": "8M"})
    try:
        sb.start()
        _sql(sb, "INSTALL PLUGIN clone SONAME 'mysql_clone.so'", "CREATE DATABASE pz",
             "CREATE TABLE pz.t (id INT PRIMARY KEY, v VARCHAR(20))")
        sb.stop("clean")
        uid, gid = server_user.pw_uid, server_user.pw_gid
        for root in (sb.path, Path(sb.datadir)):   # the server's files become its user's, as a package's are
            subprocess.run(["chown", "-R", f"{uid}:{gid}", str(root)], check=True)
        sb.options["user"] = USER      # MySQL takes the first `user` it reads: my.cnf's, not a drop-in's
        sb.save()
        write_cnf(sb)
        for own in (sb.cnf, sb.client_cnf, sb.path / "sandbox.json"):   # root's: its credentials stay root's
            os.chown(own, 0, 0)
        sb.start()
        yield sb, tier, backing_fs
    finally:
        try:
            sbx.Sandbox.load(NAME).destroy(force=True)
        finally:
            mvhelpers.unmount(tier)
            mvhelpers.unmount(backing_fs)


def _sql(sb, *statements: str) -> list:
    return execute(sb.connection_spec(), *statements) or []


def _server_user_of(sb) -> int:
    return os.stat(f"/proc/{sb.running_pid()}").st_uid


def _tree_state(root: Path) -> dict:
    """Every entry's owner, mode, inode, mtime and content digest."""
    out = {}
    for rel, st in walk(root):
        data = hashlib.sha256((root / rel).read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
        out[rel] = (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), st.st_ino, st.st_mtime_ns, data)
    return out


@pytest.mark.root
def test_a_clone_by_the_servers_own_user_goes_through_staging_and_becomes_roots(box, cli, tmp_path, server_user):
    sb, tier, backing_fs = box
    assert _server_user_of(sb) == server_user.pw_uid
    backing = os.path.join(backing_fs, "bk")
    units = str(tmp_path / "units")
    r = cli("persist", "install", "--sandbox", sb.name, "--tier", tier, "--backing", backing, "--unit-dir", units,
            "--first-sync", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["first_sync"]["method"] == "clone"
    # nothing confines a tree's server here: said, nothing written
    assert out["apparmor"].startswith("AppArmor: no change (no profile in /etc/apparmor.d attaches to"), out["apparmor"]
    assert oct(os.stat(backing).st_mode & 0o777) == "0o711"   # made for a CLONE: the user passes, lists nothing
    _sql(sb, "INSERT INTO pz.t VALUES (1, 'synced'), (2, 'synced')")
    gen = json.loads(cli("persist", "sync", "--backing", backing, "--json", check=True).stdout)
    staging = Path(backing, clone_staging.STAGING)
    st = os.stat(staging)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (server_user.pw_uid, server_user.pw_gid, 0o700)
    assert os.listdir(staging) == []
    data = Path(gen["path"], "data")
    entries = _tree_state(data)
    assert "pz/t.ibd" in entries and "ibdata1" in entries
    for rel, (uid, gid, mode, *_) in entries.items():
        want = 0o700 if (data / rel).is_dir() else 0o600
        assert (uid, gid, mode) == (0, 0, want), (rel, uid, gid, oct(mode))
    _sql(sb, "INSERT INTO pz.t VALUES (3, 'lost')")

    sb.stop("kill")                      # the power loss: the tier's contents are gone
    mvhelpers.unmount(tier)
    mvhelpers.mount_tmpfs(tier, "512M")
    cli("persist", "restore", "--backing", backing, "--if-needed", "--yes", "--accept-loss", check=True)
    assert os.stat(sb.datadir).st_uid == server_user.pw_uid      # given back to the server's user
    sb.start(recover=True)    # its pid file (beside the tier) says killed
    assert _server_user_of(sb) == server_user.pw_uid
    assert _sql(sb, "SELECT id, v FROM pz.t ORDER BY id") == [(1, "synced"), (2, "synced")]

    r = cli("persist", "uninstall", "--backing", backing, "--unit-dir", units, "--json")
    assert r.returncode == 0, r.stderr
    gone = json.loads(r.stdout)
    assert len(gone["removed"]) == 3 and not os.listdir(units) and not staging.exists()
    assert Path(gen["path"], "COMPLETE").is_file()                 # the copies are kept


@pytest.mark.root
def test_a_clone_that_fails_midway_flips_nothing_and_leaves_staging_empty(box, cli, tmp_path):
    sb, tier, backing_fs = box
    closed = os.path.join(backing_fs, "bk-closed")      # the DBA's own, 0700 root: the server's user cannot pass
    os.mkdir(closed, 0o700)
    r = cli("persist", "install", "--sandbox", sb.name, "--tier", tier, "--backing", closed, "--unit-dir",
            str(tmp_path / "closed-units"))
    assert r.returncode == 6 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"cannot pass {closed} (mode 0700" in r.stderr and f"chmod o+x {closed}" in r.stderr, r.stderr
    assert os.listdir(closed) == [] and not (tmp_path / "closed-units").exists()
    backing = os.path.join(backing_fs, "bk-fault")
    cli("persist", "install", "--sandbox", sb.name, "--tier", tier, "--backing", backing, "--unit-dir",
        str(tmp_path / "units"), "--first-sync", check=True)
    pointer = Path(backing, "current.json").read_text()
    current = Path(json.loads(pointer)["path"])
    before = _tree_state(current)
    generations = sorted(os.listdir(Path(backing, "generations")))
    # the fault: the backing file system has inodes for the clone's first files only (space is ample: MySQL's
    # own estimate passes, and the CLONE starts writing)
    used = int(subprocess.run(["df", "--output=iused", backing_fs], capture_output=True, text=True,
                              check=True).stdout.split()[-1])
    subprocess.run(["mount", "-o", f"remount,nr_inodes={used + 8}", backing_fs], check=True)
    try:
        r = cli("persist", "sync", "--backing", backing)
    finally:
        subprocess.run(["mount", "-o", "remount,nr_inodes=100000", backing_fs], check=True)
    lines = [ln for ln in r.stderr.strip().splitlines() if "as the server's user, for generation" not in ln]
    assert r.returncode == 6 and len(lines) == 1, r.stderr
    assert "CLONE LOCAL into" in lines[0] and "errno: 28 - No space left on device" in lines[0], lines[0]
    assert "the current generation stands" in lines[0]
    assert Path(backing, "current.json").read_text() == pointer
    assert sorted(os.listdir(Path(backing, "generations"))) == generations     # no .tmp-*, nothing pruned
    assert _tree_state(current) == before
    assert os.listdir(Path(backing, clone_staging.STAGING)) == []
    gen = json.loads(cli("persist", "sync", "--backing", backing, "--json", check=True).stdout)   # room again
    assert gen["path"] != str(current) and Path(gen["path"], "data", "pz", "t.ibd").is_file()


def _as_user(user, *argv: str) -> None:
    subprocess.run(["runuser", "-u", user.pw_name, "--", *argv], check=True)


@pytest.mark.root
def test_links_the_servers_user_plants_are_never_followed(server_user):
    """No MySQL needed: the user writes in the staging directory what a CLONE would, plus links to a root-owned
    canary; root's take-over refuses, discard and prepare remove the links, and the canary is unchanged."""
    base = Path(tempfile.mkdtemp(prefix="persist-clone-", dir="/var/tmp"))   # a path the user can reach
    os.chmod(base, 0o711)
    try:
        _plant_and_take_over(server_user, base)
    finally:
        shutil.rmtree(base)


def _plant_and_take_over(server_user, base: Path) -> None:
    backing, canary = base / "bk", base / "canary"
    for d in (backing, backing / "generations", canary):
        d.mkdir(mode=0o700)
    os.chmod(backing, 0o711)
    (canary / "secret").write_text("root's own\n")
    os.chmod(canary / "secret", 0o640)
    (canary / "sub").mkdir(mode=0o700)
    was = _tree_state(canary)
    uid, gid = server_user.pw_uid, server_user.pw_gid
    staging = clone_staging.prepare(str(backing), uid, gid)
    tmp = backing / "generations" / ".tmp-g"

    def clone(gen_id: str, plant) -> Path:
        d = staging / gen_id
        _as_user(server_user, "mkdir", "-p", str(d / "pz"))
        _as_user(server_user, "sh", "-c", f"echo data > {d}/ibdata1 && echo t > {d}/pz/t.ibd")
        plant(d)
        tmp.mkdir(mode=0o700)
        return d

    cases = {
        "a link in place of a file": lambda d: _as_user(server_user, "ln", "-s", str(canary / "secret"),
                                                        str(d / "pz" / "x.ibd")),
        "a link in place of a directory": lambda d: _as_user(server_user, "ln", "-s", str(canary), str(d / "db")),
        "a hard link of its own file": lambda d: _as_user(server_user, "ln", str(d / "ibdata1"), str(d / "ib2")),
        "a link in place of the clone": lambda d: (_as_user(server_user, "rm", "-r", str(d)),
                                                   _as_user(server_user, "ln", "-s", str(canary), str(d))),
    }
    for i, (what, plant) in enumerate(cases.items()):
        gen_id = f"g{i}"
        clone(gen_id, plant)
        with pytest.raises(safe_fs.UnsafePath) as refused:
            clone_staging.take_over(str(backing), gen_id, tmp / "data")
        msg = str(refused.value)
        assert "\n" not in msg and ("followed nothing" in msg or "changed nothing" in msg), (what, msg)
        shutil.rmtree(tmp)   # what sync does with a refused generation (rmtree follows no link)
        clone_staging.discard(str(backing), gen_id)
        assert os.listdir(staging) == [] and _tree_state(canary) == was, what
    # left behind by the user between syncs: the next sync's prepare removes the links, never their targets
    _as_user(server_user, "ln", "-s", str(canary), str(staging / "stale"))
    _as_user(server_user, "mkdir", str(staging / "half"))
    _as_user(server_user, "ln", "-s", str(canary / "secret"), str(staging / "half" / "ibdata1"))
    clone_staging.prepare(str(backing), uid, gid)
    assert os.listdir(staging) == [] and _tree_state(canary) == was
    # a backing the user cannot pass: refused in one line naming the fix, nothing made
    os.chmod(backing, 0o700)
    with pytest.raises(TierError, match=r"cannot pass .*chmod o\+x"):
        clone_staging.prepare(str(backing), uid, gid)


def _cfg(backing: str) -> PersistConfig:
    """A packaged MySQL's config as install records it, the server not running (its binary: the flavor's)."""
    loc = Locations(datadir="/srv/tier/mysql", ibdata_dir="/srv/tier/mysql", redo_dir="/srv/tier/mysql",
                    undo_dir="/srv/tier/mysql", data_file_path="ibdata1:12M:autoextend", flavor="mysql",
                    version="9.7.4", page_size=16384, uid=105, gid=105)
    return PersistConfig("/srv/tier", backing, 300, {"socket": "/run/mysqld/mysqld.sock"},
                         "mysql.service", loc, "clone")


def _parse(root: Path, profile: str) -> subprocess.CompletedProcess:
    return subprocess.run(["apparmor_parser", "-Q", "-K", "--base", str(root), "-I", str(root), str(root / profile)],
                          capture_output=True, text=True)


def test_the_apparmor_rule_for_staging_goes_in_mysqlds_local_include_and_leaves_at_uninstall(tmp_path, fixtures_dir):
    root = tmp_path / "apparmor.d"
    shutil.copytree("/etc/apparmor.d", root, symlinks=True, ignore=shutil.ignore_patterns("cache"))
    for name in ("usr.sbin.mariadbd", "usr.sbin.mysqld", "mariadbd"):
        (root / name).unlink(missing_ok=True)
    (root / "local").mkdir(exist_ok=True)
    sys_root = tmp_path / "sys"          # no AppArmor in this kernel: written and parsed, never loaded
    sys_root.mkdir()
    cfg = _cfg("/srv/pzram/backing")
    unconfined = confinement.plan(cfg, str(root), str(sys_root))
    assert unconfined.action == "none" and "nothing to change" in confinement.describe(unconfined)

    shutil.copy(fixtures_dir / "distro-packages" / MYSQL_PROFILE, root / "usr.sbin.mysqld")
    local = root / "local" / "usr.sbin.mysqld"
    local.touch()
    change = confinement.plan(cfg, str(root), str(sys_root))
    line = confinement.describe(change)
    assert change.action == "write" and change.local_path == str(local), change
    assert "/srv/pzram/backing/clone-staging/ r, /srv/pzram/backing/clone-staging/** rwk," in line, line
    assert "profile /usr/sbin/mysqld" in line and str(local) in line, line
    confinement.apply(change, str(root))
    text = local.read_text()
    assert "# BEGIN innotier persist-srv-pzram-backing" in text and "/srv/pzram/backing/clone-staging/** rwk," in text
    r = _parse(root, "usr.sbin.mysqld")
    assert r.returncode == 0, r.stderr
    recorded = confinement.recorded(dataclasses.replace(cfg, apparmor=change.to_dict()))
    confinement.remove(recorded)
    assert local.read_text() == "" and _parse(root, "usr.sbin.mysqld").returncode == 0
    assert confinement.plan(dataclasses.replace(cfg, method="mariadb-backup"), str(root), str(sys_root)) is None

    # a profile with no site-rule include: one line naming the rule and the include, nothing written
    profile = root / "usr.sbin.mysqld"
    profile.write_text("\n".join(ln for ln in profile.read_text().splitlines() if "local/usr.sbin.mysqld" not in ln))
    with pytest.raises(TierError) as refused:
        confinement.plan(cfg, str(root), str(sys_root))
    msg = str(refused.value)
    assert "\n" not in msg and "include if exists <local/usr.sbin.mysqld>" in msg, msg
    assert "/srv/pzram/backing/clone-staging/** rwk," in msg and "persist install` again" in msg, msg
    assert local.read_text() == ""
