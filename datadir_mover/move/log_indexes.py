"""The log indexes of a moved datadir that name their files by an absolute path inside it, rewritten in the copy.

The server writes into ``binlog.index`` (and the relay log's index, and MariaDB's ``relay-log.info``) each file's
name as it built it from ``log_bin`` / ``relay_log``: given an absolute path, an absolute name in the old datadir.
The copy keeps those bytes (the proof compares them with the source), so without a rewrite the server started on
the target would read the binary logs before the move from the old datadir, purge them there (changing the source
the proof and rollback depend on), and after finalize know them only as missing files (MySQL lists them with size
0; a replica or a point-in-time recovery that needs them fails) although their copies are in the target.

So at START, after the target was checked as VERIFY read it back and before the server starts, each such file in
the target gets its lines naming a file inside the old datadir renamed into the target (the rest kept byte for
byte), written atomically with its owner and mode, through a checked directory descriptor (no link followed).
The proof is unaffected: the target's digests were taken at the switch, before the rewrite.  The source keeps its
own index (rollback starts the server on it as it was); the way home rewrites the names back.  Doing it again is
harmless (a name already in the target does not match), so a resumed START repeats it.
"""

from __future__ import annotations

import os
import stat

from datadir_mover.move.copy.safe_fs import Tree
from datadir_mover.move.followers import inside
from tuner.core.server import ServerModel

# server variables naming a file that lists others by name (relative names are relative to the datadir)
LISTS = ("log_bin_index", "relay_log_index", "relay_log_info_file")
TEMP_SUFFIX = ".innotier-rewrite"


def find(model: ServerModel, source: str) -> list[str]:
    """Paths relative to ``source`` of the lists in it that name a file by an absolute path inside it."""
    out = []
    for var in LISTS:
        given = (model.variables.get(var) or "").strip()
        if not given:
            continue
        path = os.path.normpath(os.path.join(model.datadir, given))
        if inside(path, source) and path != os.path.normpath(source) and _names_inside(path, source):
            out.append(os.path.relpath(path, os.path.normpath(source)))
    return sorted(set(out))


def note(rels: list[str], source: str) -> list[str]:
    return [f"{rel} names files by their absolute paths in {source}: those names are renamed into the target in "
            "its copy at START (the source keeps its own)" for rel in rels]


def _names_inside(path: str, source: str) -> bool:
    try:  # the server's user can write in the datadir: root follows no link it planted
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            return any(_renamed(line, source, source) is not None for line in f)
    except OSError:
        return False


def _renamed(line: bytes, source: str, target: str) -> bytes | None:
    """The line naming the same file in ``target``; None when it names no file inside ``source``."""
    prefix = os.fsencode(os.path.normpath(source)) + b"/"
    if not line.startswith(prefix):
        return None
    return os.fsencode(os.path.normpath(target)) + b"/" + line[len(prefix):]


def rewrite(target: str, source: str, rels: list[str], uid: int, gid: int) -> list[str]:
    """Rename, in the target's copies of ``rels``, the files named inside ``source`` into ``target``; the files
    changed (a missing one is skipped: the server makes a new index)."""
    changed = []
    with Tree(target) as tree:
        for rel in rels:
            fd, name = tree.parent(rel)
            try:
                src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                continue
            with os.fdopen(src, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    continue
                lines = f.read().splitlines(keepends=True)
            new = [_renamed(line, source, target) or line for line in lines]
            if new == lines:
                continue
            _replace(fd, name, b"".join(new), uid, gid, stat.S_IMODE(st.st_mode))
            changed.append(rel)
    return changed


def _replace(dir_fd: int, name: str, data: bytes, uid: int, gid: int, mode: int) -> None:
    temp = name + TEMP_SUFFIX
    try:
        os.unlink(temp, dir_fd=dir_fd)  # left by a rewrite a crash interrupted
    except FileNotFoundError:
        pass
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    os.fsync(dir_fd)
