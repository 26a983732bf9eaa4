"""The target as the server finds it: checked at every START, a resumed one included, before the server starts on it.

VERIFY read every copy back and compared it with what was read from the source; the copy
manifest (``copy-manifest.json``) keeps each file's digest and the target's size, mtime,
ctime and inode right after that read-back.  Between VERIFY and START nothing else looks at
the target, and after a crash that window has no bound (a tier remounted, a hand edit, a
bad block).  So before the server is started on it:

- a file this mover read back itself (the same process: ``vouched``) whose stat has not moved
  since is taken as it was;
- every other file (a restarted mover, a stat that moved) is read again, whole, from its
  medium and its digest compared with the manifest's;
- directories must be there, symbolic links must point where the source's did.

A difference halts the move before the server starts: the source is still the good copy.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from datadir_mover.move.copy import FileRecord, Manifest, digest_file
from datadir_mover.move.plan import Plan
from datadir_mover.move.stepbase import MoveHalted


def _stat_as_verified(rec: FileRecord, st: os.stat_result) -> bool:
    return rec.verified and (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) == (
        rec.size, rec.target_mtime_ns, rec.target_ctime_ns, rec.target_ino)


def _difference(target: Path, rec: FileRecord, vouched: bool) -> tuple[str | None, bool]:
    """(what is wrong with one entry or None, whether it was read again)."""
    p = target / rec.rel
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return "missing", False
    if rec.kind == "dir":
        return (None if stat.S_ISDIR(st.st_mode) else "not a directory"), False
    if rec.kind == "symlink":
        if not stat.S_ISLNK(st.st_mode) or os.readlink(p) != rec.link:
            return f"no longer a link to {rec.link}", False
        return None, False
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file", False
    if vouched and _stat_as_verified(rec, st):
        return None, False
    if st.st_size != rec.size:
        return f"{st.st_size} bytes, {rec.size} when verified", False
    if rec.digest is None:
        return "no digest of it was taken", False
    return (None if digest_file(str(p), drop_cache=True) == rec.digest else "content changed since it was verified"), True


def require_as_verified(plan: Plan, manifest: Manifest, vouched: bool) -> dict[str, int]:
    """Halt in one line when the target is not what VERIFY read back; the files read again and checked."""
    target = Path(plan.target_dir)
    bad: list[str] = []
    reread = 0
    for rec in sorted(manifest.records.values(), key=lambda r: r.rel):
        what, read = _difference(target, rec, vouched)
        reread += read
        if what:
            bad.append(f"{rec.rel} ({what})")
    if bad:
        raise MoveHalted(f"the target {plan.target_dir} changed after the copy was verified: {'; '.join(bad[:3])}"
                         f"{' ...' if len(bad) > 3 else ''}; the server was not started on it (the source is the good "
                         f"copy): run `innotier move rollback --id {plan.move_id}` and move again")
    return {"target_files_checked": sum(1 for r in manifest.records.values() if r.kind == "file"),
            "target_files_read_again": reread}
