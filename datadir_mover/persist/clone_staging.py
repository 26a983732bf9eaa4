"""Where the server writes a CLONE: a staging directory its own user may write, then taken over by root.

``CLONE LOCAL DATA DIRECTORY`` is carried out by the server itself, as its user (``mysql`` on a packaged host)
and under its AppArmor profile, so it cannot write into the root-owned 0700 generation being made.  It writes
into ``<backing>/clone-staging/<generation id>`` instead: ``clone-staging`` belongs to the server's user (the
owner of its datadir), mode 0700, on the backing file system (so the take-over is a rename); the backing
directory itself must let that user pass (search permission: a backing directory ``persist install`` makes for
a CLONE is 0711, which lists nothing).  AppArmor's rule for it is ``persist.confinement``'s.

Root then takes the clone over without following anything that user may have planted (it can write the
staging directory, and may keep descriptors open on the clone's directories): the clone is renamed into the
root-owned generation, and every directory is made root's, 0700, through a descriptor opened without following
a link (``safe_fs.Tree``) *before* it is listed, so what it lists can no longer change; every file is opened
with ``O_NOFOLLOW``, must be a regular file with one link, and is made root's, 0600, on that descriptor.  A
link, a device, a FIFO or a hard-linked file in a clone is refused (a CLONE writes none); nothing is followed.

A CLONE that failed (the file system full, a denial, the server killed) leaves a partial directory: it is removed, as
anything an earlier crash left in the staging directory, each entry relative to a checked directory (a link is
removed, never followed).  The current generation is never touched.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from tuner.core.errors import MoveError, TierError

from datadir_mover.move.copy import safe_fs

STAGING = "clone-staging"
NOFOLLOW_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def staging_dir(backing: str) -> Path:
    return Path(backing, STAGING)


def server_owner(datadir: str) -> tuple[int, int]:
    """The server's user and group: the owner of its datadir (the user it writes its files as)."""
    st = os.stat(datadir)
    return st.st_uid, st.st_gid


def _can_pass(st: os.stat_result, uid: int, gid: int) -> bool:
    """Search permission on a directory for ``uid``/``gid`` (its primary group; root passes anywhere)."""
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def require_reachable(backing: str, uid: int, gid: int) -> None:
    """The server's user can reach ``<backing>/clone-staging`` (every directory on the way lets it pass)."""
    for d in [Path(backing), *Path(backing).parents]:
        st = os.stat(d)
        if not _can_pass(st, uid, gid):
            raise TierError(f"the server's user (uid {uid}) cannot pass {d} (mode {stat.S_IMODE(st.st_mode):04o}, "
                            f"owner uid {st.st_uid}), so its CLONE cannot write {staging_dir(backing)}; give it "
                            f"search permission (`chmod o+x {d}`: it lists nothing) and sync again; nothing was "
                            "copied")


def prepare(backing: str, uid: int, gid: int) -> Path:
    """``<backing>/clone-staging`` made (or kept), the server user's, 0700, emptied of what an earlier failed
    clone left; returns it."""
    require_reachable(backing, uid, gid)
    staging = staging_dir(backing)
    try:
        os.mkdir(staging, 0o700)
    except FileExistsError:
        pass
    with safe_fs.Tree(staging, follow_root=False) as tree:   # in root's backing: only root names it
        tree.set_owner_and_mode(0, 0, 0o700)   # root's while it is emptied: the user adds nothing meanwhile
        _empty(tree)
        tree.set_owner_and_mode(uid, gid, 0o700)
    return staging


def clone_dir(backing: str, gen_id: str) -> Path:
    """Where the CLONE of generation ``gen_id`` goes (CLONE makes it; it must not exist)."""
    return staging_dir(backing) / gen_id


def discard(backing: str, gen_id: str) -> None:
    """A failed or refused clone removed from the staging directory, whatever it holds; no link followed."""
    staging = staging_dir(backing)
    if not staging.is_dir():
        return
    with safe_fs.Tree(staging, follow_root=False) as tree:
        _remove(tree, gen_id)


def remove_staging(backing: str) -> None:
    """The staging directory and whatever is in it gone (``persist uninstall``); no link followed."""
    staging = staging_dir(backing)
    if not staging.is_dir():
        return
    with safe_fs.Tree(staging, follow_root=False) as tree:
        tree.set_owner_and_mode(0, 0, 0o700)
        _empty(tree)
    os.rmdir(staging)


def _empty(tree: safe_fs.Tree) -> None:
    for name in os.listdir(tree.dir_fd()):
        _remove(tree, name)


def _remove(tree: safe_fs.Tree, rel: str) -> None:
    """``rel`` and everything below it, deepest first, each relative to a directory opened without a link and
    made root's before it is listed (the server's user can add nothing to it while it goes)."""
    try:
        st = tree.lstat(rel)
    except FileNotFoundError:
        return
    rels = [rel]
    if stat.S_ISDIR(st.st_mode):
        rels += _below(tree, rel)
    try:
        safe_fs.remove_all(tree, rels)
    except safe_fs.UnsafePath:
        raise
    except MoveError as exc:   # remove_all's one line, said as persist says it
        raise TierError(str(exc).replace("it is no longer in the source", "a failed clone left it")) from None


def _below(tree: safe_fs.Tree, rel: str) -> list[str]:
    tree.set_owner_and_mode(0, 0, 0o700, rel)
    out = []
    for name in os.listdir(tree.dir_fd(rel)):
        sub = f"{rel}/{name}"
        out.append(sub)
        if stat.S_ISDIR(tree.lstat(sub).st_mode):
            out += _below(tree, sub)
    return out


def take_over(backing: str, gen_id: str, dest: Path) -> None:
    """The finished clone renamed to ``dest`` (in root's generation directory, same file system) and made root's:
    directories 0700, files 0600; a link, special file or hard-linked file in it is refused (UnsafePath)."""
    staging = staging_dir(backing)
    with safe_fs.Tree(staging, follow_root=False) as tree, safe_fs.Tree(dest.parent, follow_root=False) as gen:
        os.rename(gen_id, dest.name, src_dir_fd=tree.dir_fd(), dst_dir_fd=gen.dir_fd())
        if not stat.S_ISDIR(gen.lstat(dest.name).st_mode):   # the user put a link or a file in the clone's place
            raise safe_fs.UnsafePath(f"{staging / gen_id} was not a directory when root took the clone over (a "
                                     "link or file the server's user put there?); root followed nothing; the sync "
                                     "is refused: look at what the server's user did, then sync again")
        _own(gen, dest.name)


def _own(tree: safe_fs.Tree, rel: str) -> None:
    """Directory ``rel`` made root's and 0700 before it is listed, then each entry in turn."""
    tree.set_owner_and_mode(0, 0, 0o700, rel)
    for name in sorted(os.listdir(tree.dir_fd(rel))):
        sub = f"{rel}/{name}"
        mode = tree.lstat(sub).st_mode
        if stat.S_ISDIR(mode):
            _own(tree, sub)
        else:
            _own_file(tree, sub)


def _own_file(tree: safe_fs.Tree, rel: str) -> None:
    dfd, name = tree.parent(rel)
    where = os.path.join(tree.root, rel)
    try:
        fd = os.open(name, NOFOLLOW_FILE, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise safe_fs.UnsafePath(f"{where} is a symbolic link in a clone (CLONE writes none: the server's user "
                                     "put it there?); root followed nothing; the sync is refused") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            what = "a hard-linked file" if stat.S_ISREG(st.st_mode) else "not a regular file"
            raise safe_fs.UnsafePath(f"{where} is {what} in a clone (CLONE writes none: the server's user put it "
                                     "there?); root changed nothing of it; the sync is refused")
        os.fchown(fd, 0, 0)
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
