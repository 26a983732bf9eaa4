"""Root never follows a path the server's user can change: a real unprivileged user races the copy at each step.

The server's user owns the source datadir and, from before the pre-copy, the target.  Here a real
system user (``recfs-racer``, made for this module and removed after) plays it: a process of its
own that, when the mover reaches a step, plants a symbolic link or swaps a directory for one
pointing at a root-owned canary tree outside both trees, and answers only once it has done so.
The mover is paused at the step (a wrapper around the ``safe_fs.Tree`` call it is about to make),
so every race is won by the racer, deterministically.  After each: the canary tree is exactly as it
was (no file created, chowned, chmodded, written or removed there), and the mover refused in one
line naming the link, or did its work inside the trees.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

import mvhelpers

from datadir_mover.move.copy import Manifest, UnsafePath, copy_tree, safe_fs, verify_tree, walk
from datadir_mover.move import finalize_step

RACER = "recfs-racer"
# the racer: one line of JSON in, the change made as the unprivileged user, "ok" (or the error) out
RACER_CODE = r"""
import json, os, sys
for line in sys.stdin:
    c = json.loads(line)
    try:
        if c["op"] == "link":
            os.symlink(c["to"], c["at"])
        elif c["op"] == "swap":  # the directory renamed aside, a link to the canary in its place
            os.rename(c["at"], c["at"] + ".aside")
            os.symlink(c["to"], c["at"])
        elif c["op"] == "replace":  # the file removed, a link to the canary in its place
            os.unlink(c["at"])
            os.symlink(c["to"], c["at"])
        print("ok", flush=True)
    except OSError as exc:
        print(f"error: {exc}", flush=True)
"""


@pytest.fixture(scope="module")
def racer_user():
    with mvhelpers.system_user(RACER) as entry:
        yield entry


class Racer:
    """The racer's process (running as the unprivileged user); ``do`` returns once its change is made."""

    def __init__(self, user: pwd.struct_passwd):
        self.proc = subprocess.Popen(["runuser", "-u", user.pw_name, "--", "/usr/bin/python3", "-c", RACER_CODE],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.done: list[str] = []

    def do(self, op: str, at: str, to: str) -> None:
        self.proc.stdin.write(json.dumps({"op": op, "at": at, "to": to}) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        assert answer == "ok", f"the racer could not {op} {at}: {answer}"
        assert os.path.islink(at), f"the racer's link {at} is not there"
        self.done.append(f"{op} {at}")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture
def trees(racer_user):
    """src (the racer's, like a datadir), dst (made by root, chowned to the racer as the move does), and a
    root-owned canary tree outside both with the names the mover would use."""
    base = Path(tempfile.mkdtemp(prefix="recfs-race-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    uid, gid = racer_user.pw_uid, racer_user.pw_gid
    src, dst, canary = base / "src", base / "dst", base / "canary"
    for d in (src, src / "db", dst):
        d.mkdir()
        os.chown(d, uid, gid)
    for name, data in (("db/t1.ibd", os.urandom(200_000)), ("db/t2.ibd", os.urandom(3000)), ("ibdata1", b"i" * 9000)):
        (src / name).write_bytes(data)
        os.chown(src / name, uid, gid)
    canary.mkdir(mode=0o755)
    for name in ("t1.ibd", "t2.ibd", "gone.ibd"):
        (canary / name).write_bytes(b"root's own " + name.encode())
        os.chmod(canary / name, 0o600)
    (canary / "sub").mkdir(mode=0o711)
    racer = Racer(racer_user)
    yield {"src": src, "dst": dst, "canary": canary, "racer": racer, "uid": uid}
    racer.close()
    shutil.rmtree(base)


def snapshot(root: Path) -> dict:
    """Every entry with its owner, mode, times, inode and content: what must not change outside the trees."""
    out = {}
    for rel, st in walk(root):
        data = hashlib.sha256((root / rel).read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
        out[rel] = (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, data)
    d = os.lstat(root)
    out["."] = (d.st_mode, d.st_uid, d.st_gid, d.st_mtime_ns, d.st_ctime_ns)
    return out


def pause_before(monkeypatch, method: str, when, act) -> list[str]:
    """Run ``act`` (the racer's move) the first time the mover calls Tree.<method> with a matching path."""
    real = getattr(safe_fs.Tree, method)
    fired: list[str] = []

    def paused(self, *args, **kwargs):
        rel = next((a for a in args if isinstance(a, str)), kwargs.get("rel", ""))
        if not fired and when(self, rel):
            fired.append(rel)
            act()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(safe_fs.Tree, method, paused)
    return fired


def in_(tree: Path):
    return lambda t, rel, root=str(tree): t.root == root


@pytest.mark.root
def test_link_planted_where_the_copy_makes_a_directory_is_refused(trees, monkeypatch):
    src, dst, canary, racer = trees["src"], trees["dst"], trees["canary"], trees["racer"]
    before = snapshot(canary)
    fired = pause_before(monkeypatch, "make_dir", lambda t, rel: rel == "db",
                         lambda: racer.do("link", str(dst / "db"), str(canary)))
    with pytest.raises(UnsafePath) as refused:
        copy_tree(src, dst, walk(src), workers=1)
    assert fired and f"{dst}/db is a symbolic link" in str(refused.value) and "\n" not in str(refused.value)
    assert snapshot(canary) == before, "root changed the canary through the link (mkdir, chown or chmod)"


@pytest.mark.root
def test_directory_swapped_for_a_link_after_it_was_made_keeps_every_write_inside(trees, monkeypatch):
    src, dst, canary, racer = trees["src"], trees["dst"], trees["canary"], trees["racer"]
    before = snapshot(canary)
    fired = pause_before(monkeypatch, "path", lambda t, rel: t.root == str(dst) and rel == "db/t1.ibd",
                         lambda: racer.do("swap", str(dst / "db"), str(canary)))
    manifest, _ = copy_tree(src, dst, walk(src), workers=1)
    assert fired
    assert snapshot(canary) == before, "root wrote, chowned or chmodded through the swapped directory"
    # the writes went into the directory the mover made (now renamed aside by the racer), nowhere else
    assert (dst / "db.aside" / "t1.ibd").read_bytes() == (src / "db" / "t1.ibd").read_bytes()
    monkeypatch.undo()
    with pytest.raises(UnsafePath, match=f"{dst}/db is a symbolic link"):
        verify_tree(manifest)  # VERIFY refuses the target as it now is


@pytest.mark.root
def test_link_planted_at_a_file_name_is_replaced_not_written_through(trees, monkeypatch):
    src, dst, canary, racer = trees["src"], trees["dst"], trees["canary"], trees["racer"]
    before = snapshot(canary)
    fired = pause_before(monkeypatch, "path", lambda t, rel: t.root == str(dst) and rel == "db/t2.ibd",
                         lambda: racer.do("link", str(dst / "db" / "t2.ibd"), str(canary / "t2.ibd")))
    manifest, _ = copy_tree(src, dst, walk(src), workers=1)
    assert fired and snapshot(canary) == before
    assert not (dst / "db" / "t2.ibd").is_symlink()
    assert (dst / "db" / "t2.ibd").read_bytes() == (src / "db" / "t2.ibd").read_bytes()
    assert os.stat(dst / "db" / "t2.ibd").st_uid == trees["uid"]
    verify_tree(manifest)


@pytest.mark.root
def test_source_directory_swapped_for_a_link_is_refused_not_read(trees, monkeypatch):
    src, dst, canary, racer = trees["src"], trees["dst"], trees["canary"], trees["racer"]
    before = snapshot(canary)
    entries = walk(src)  # listed before the swap, as a pass lists first
    fired = pause_before(monkeypatch, "path", lambda t, rel: t.root == str(src) and rel == "db/t1.ibd",
                         lambda: racer.do("swap", str(src / "db"), str(canary)))
    with pytest.raises(UnsafePath, match=f"{src}/db is a symbolic link"):
        copy_tree(src, dst, entries, workers=1)
    assert fired and snapshot(canary) == before
    assert not (dst / "db" / "t1.ibd").exists(), "root copied the canary (root's file) into the target"


def canary_bytes_in(tree: Path) -> list[str]:
    """The regular files of ``tree`` (no link followed) holding a canary file's bytes: root read them into it."""
    return [rel for rel, st in walk(tree) if stat.S_ISREG(st.st_mode)
            and (tree / rel).read_bytes().startswith(b"root's own ")]


@pytest.mark.root
def test_links_planted_in_the_source_between_precopy_and_copy_are_copied_as_links(trees):
    """The server's user adds links to root's files and directories to the source once the pre-copy is done, one
    under a new name and one in place of a table the pre-copy copied: the offline copy takes each as a link (its
    text, read with readlink), so nothing outside the trees is read into the target, and VERIFY accepts it."""
    src, dst, canary, racer = trees["src"], trees["dst"], trees["canary"], trees["racer"]
    precopied, _ = copy_tree(src, dst, walk(src), workers=1)  # the pre-copy's pass, the server running
    before = snapshot(canary)
    racer.do("link", str(src / "db" / "t3.ibd"), str(canary / "t1.ibd"))  # a new name
    racer.do("link", str(src / "db" / "sub"), str(canary / "sub"))  # a link to a directory outside
    racer.do("replace", str(src / "db" / "t2.ibd"), str(canary / "t2.ibd"))  # a copied table's name
    manifest, _ = copy_tree(src, dst, walk(src), previous=precopied, workers=1, stable=True)  # COPY, stopped
    assert snapshot(canary) == before, "root changed the canary while copying the links"
    for name in ("t3.ibd", "sub", "t2.ibd"):
        assert os.readlink(dst / "db" / name) == os.readlink(src / "db" / name)
        assert manifest.records[f"db/{name}"].kind == "symlink" and os.lstat(dst / "db" / name).st_uid == trees["uid"]
    assert canary_bytes_in(dst) == [], "root read a file outside the trees into the target"
    assert (dst / "db" / "t1.ibd").read_bytes() == (src / "db" / "t1.ibd").read_bytes()
    verify_tree(manifest)
    assert snapshot(canary) == before


@pytest.mark.root
def test_source_file_swapped_for_a_link_after_the_walk_is_refused_not_read(trees, monkeypatch):
    """The pass listed ``db/t2.ibd`` as a file; the server's user puts a link to root's file in its place before
    the copy opens it: the copy refuses in one line naming it, and reads nothing of the canary."""
    src, dst, canary, racer = trees["src"], trees["dst"], trees["canary"], trees["racer"]
    before = snapshot(canary)
    entries = walk(src)
    fired = pause_before(monkeypatch, "path", lambda t, rel: t.root == str(src) and rel == "db/t2.ibd",
                         lambda: racer.do("replace", str(src / "db" / "t2.ibd"), str(canary / "t2.ibd")))
    with pytest.raises(UnsafePath) as refused:
        copy_tree(src, dst, entries, workers=1)
    assert fired and f"{src}/db/t2.ibd: " in str(refused.value) and "\n" not in str(refused.value)
    assert snapshot(canary) == before and canary_bytes_in(dst) == []


@pytest.mark.root
def test_source_directory_swapped_for_a_link_between_precopy_and_copy_is_refused(trees):
    """After the pre-copy the server's user swaps ``db`` for a link to root's directory: the offline copy refuses
    in one line naming the link, before it changes anything in the target, and reads nothing through it."""
    src, dst, canary, racer = trees["src"], trees["dst"], trees["canary"], trees["racer"]
    precopied, _ = copy_tree(src, dst, walk(src), workers=1)
    copied = snapshot(dst)
    before = snapshot(canary)
    racer.do("swap", str(src / "db"), str(canary))
    with pytest.raises(UnsafePath) as refused:
        copy_tree(src, dst, walk(src), previous=precopied, workers=1, stable=True)
    text = str(refused.value)
    assert f"{src}/db is a symbolic link (to {canary})" in text and "\n" not in text, text
    assert snapshot(canary) == before and canary_bytes_in(dst) == []
    assert snapshot(dst) == copied, "the refused copy changed the target"


@pytest.mark.root
def test_removal_of_what_the_source_no_longer_has_refuses_a_swapped_directory(trees, monkeypatch):
    src, dst, canary, racer = trees["src"], trees["dst"], trees["canary"], trees["racer"]
    (src / "old").mkdir()
    (src / "old" / "gone.ibd").write_bytes(b"a table dropped later")
    for p in (src / "old", src / "old" / "gone.ibd"):
        os.chown(p, trees["uid"], trees["uid"])
    first, _ = copy_tree(src, dst, walk(src), workers=1)
    shutil.rmtree(src / "old")  # the database dropped on the source; the next pass removes its copy
    before = snapshot(canary)
    fired = pause_before(monkeypatch, "remove", lambda t, rel: rel == "old/gone.ibd",
                         lambda: racer.do("swap", str(dst / "old"), str(canary)))
    with pytest.raises(UnsafePath, match=f"{dst}/old is a symbolic link"):
        copy_tree(src, dst, walk(src), previous=first, workers=1)
    assert fired and snapshot(canary) == before, "root removed the canary's gone.ibd through the link"
    assert (dst / "old.aside" / "gone.ibd").exists()


@pytest.mark.root
def test_finalize_removal_through_a_swapped_source_directory_stays_inside(trees, monkeypatch):
    src, dst, canary, racer = trees["src"], trees["dst"], trees["canary"], trees["racer"]
    manifest, _ = copy_tree(src, dst, walk(src), workers=1)
    before = snapshot(canary)
    fired = pause_before(monkeypatch, "remove", lambda t, rel: rel == "db/t1.ibd",
                         lambda: racer.do("swap", str(src / "db"), str(canary)))
    with safe_fs.Tree(src) as tree:
        removed, kept = finalize_step._remove_copied(tree, Manifest.from_dict(manifest.to_dict()))
    assert fired and snapshot(canary) == before, "finalize removed a file of the canary through the link"
    # the removals went to the directory the copy was taken from (renamed aside), and the racer's link itself
    assert not (src / "db.aside" / "t1.ibd").exists() and not (src / "db.aside" / "t2.ibd").exists()
    assert not (src / "ibdata1").exists() and not os.path.lexists(src / "db") and kept == []


@pytest.mark.root
def test_rollback_removal_of_the_target_stays_inside_while_a_directory_is_swapped(trees, monkeypatch):
    """A rollback removes the target a move made through descriptors: the racer swaps its ``db`` for a link to the
    canary while the removal runs; the files go from the directory the rollback opened (renamed aside), the link is
    removed, not followed, the renamed directory with them, and nothing of the canary."""
    from types import SimpleNamespace

    from datadir_mover.move.rollback_steps import remove_target

    src, dst, canary, racer = trees["src"], trees["dst"], trees["canary"], trees["racer"]
    copy_tree(src, dst, walk(src), workers=1)
    before = snapshot(canary)
    fired = pause_before(monkeypatch, "remove", lambda t, rel: rel == "db/t1.ibd",
                         lambda: racer.do("swap", str(dst / "db"), str(canary)))
    removed = remove_target(SimpleNamespace(target_dir=str(dst), target_exists=False, component="datadir"))
    assert fired and snapshot(canary) == before, "the rollback removed a file of the canary through the link"
    assert removed == 5 and not os.path.lexists(dst)  # db/t1.ibd, db/t2.ibd, ibdata1, the link, db.aside


@pytest.mark.root
def test_component_walk_without_openat2_refuses_the_same_link(trees, monkeypatch):
    """The fallback for kernels without openat2 (O_NOFOLLOW at every component) refuses the same race."""
    src, dst, canary, racer = trees["src"], trees["dst"], trees["canary"], trees["racer"]
    monkeypatch.setattr(safe_fs, "_openat2_works", False)
    before = snapshot(canary)
    pause_before(monkeypatch, "make_dir", lambda t, rel: rel == "db",
                 lambda: racer.do("link", str(dst / "db"), str(canary)))
    with pytest.raises(UnsafePath, match=f"{dst}/db is a symbolic link"):
        copy_tree(src, dst, walk(src), workers=1)
    assert snapshot(canary) == before


def test_finalize_removes_the_servers_scratch_but_follows_no_link_planted_in_it(tmp_path):
    """finalize's clean-up of MySQL's #innodb_temp/ (a directory the server's user writes): session tablespaces
    and the empty directory go; a link planted as the directory or among its files is never followed, and then
    nothing of the directory is removed."""
    from datadir_mover.move.copy import Tree
    from datadir_mover.move.finalize_step import _remove_server_scratch

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "temp_1.ibt").write_text("not the server's")
    plain = tmp_path / "plain"
    (plain / "#innodb_temp").mkdir(parents=True)
    (plain / "#innodb_temp" / "temp_1.ibt").write_bytes(b"\0" * 16)
    (plain / "ibtmp1").write_bytes(b"\0" * 16)
    with Tree(plain) as tree:
        _remove_server_scratch(tree)
    assert list(plain.iterdir()) == []
    as_dir = tmp_path / "as-dir"
    as_dir.mkdir()
    (as_dir / "#innodb_temp").symlink_to(outside)          # the directory swapped for a link
    inside = tmp_path / "inside"
    (inside / "#innodb_temp").mkdir(parents=True)
    (inside / "#innodb_temp" / "temp_2.ibt").symlink_to(outside / "temp_1.ibt")   # a link among its files
    for root in (as_dir, inside):
        with Tree(root) as tree:
            _remove_server_scratch(tree)
        assert (root / "#innodb_temp").is_symlink() or (root / "#innodb_temp" / "temp_2.ibt").is_symlink()
    assert (outside / "temp_1.ibt").read_text() == "not the server's"


def test_finalize_keeps_a_source_file_whose_only_change_since_the_copy_is_its_ctime(tmp_path):
    """finalize removes a source file only as it was copied: a chmod (as a hard link, or a write with its mtime put
    back) moves only the ctime, and such a file is kept and named, with its directory."""
    from datadir_mover.move.copy import Tree
    from waiting import wait_for

    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "db").mkdir(parents=True)
    dst.mkdir()
    for name in ("t1.ibd", "t2.ibd"):
        (src / "db" / name).write_bytes(name.encode() * 2000)
    manifest, _ = copy_tree(src, dst, walk(src), workers=1)
    changed = src / "db" / "t2.ibd"
    copied = os.stat(changed)

    def ctime_moved() -> bool:  # the clock the kernel stamps with may not have ticked since the copy: chmod again
        os.chmod(changed, stat.S_IMODE(os.stat(changed).st_mode) ^ 0o040)
        return os.stat(changed).st_ctime_ns != copied.st_ctime_ns

    wait_for(ctime_moved, 10, "a chmod to move the file's ctime")
    now = os.stat(changed)
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (copied.st_size, copied.st_mtime_ns, copied.st_ino)
    with Tree(src) as tree:
        removed, kept = finalize_step._remove_copied(tree, Manifest.from_dict(manifest.to_dict()))
    assert kept == ["db/t2.ibd", "db/"], kept
    assert changed.exists() and not (src / "db" / "t1.ibd").exists() and removed == 1
