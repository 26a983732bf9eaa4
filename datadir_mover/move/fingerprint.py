"""Is the source still what the move verified?  Checked before the server is started on the target.

If the mover dies after VERIFY and someone starts the server on the source and it takes
writes, starting it on the target would silently drop them.  A stat check cannot tell (a
write through a shared mapping leaves mtime alone), so the fingerprint taken at VERIFY holds
what a server run cannot leave untouched: the redo log's checkpoint LSN (every start and
every clean shutdown writes a checkpoint) and the list of files with their sizes.  Both redo
formats of the servers here are read by content: MariaDB 10.8+'s ``ib_logfile0`` and MySQL
8.0.30+'s ``#innodb_redo/#ib_redoN`` (``copy/redo.py`` has both layouts); a redo log in neither
format falls back to its size and mtime.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from datadir_mover.move import components
from datadir_mover.move.copy import walk
from datadir_mover.move.copy.redo import (MYSQL_REDO_CHECKPOINTS, MYSQL_REDO_DIR, MYSQL_REDO_FILE,
                                          MYSQL_REDO_FORMATS, REDO_CHECKPOINTS, REDO_FORMATS)
from datadir_mover.move.journal import Journal
from datadir_mover.move.plan import Plan
from datadir_mover.move.stepbase import MoveHalted, model_stub

FINGERPRINT_FILE = "source-fingerprint.json"


def _checkpoint_in(path: Path, formats: tuple[int, ...], offsets: tuple[int, ...]) -> int | None:
    """The newest of the checkpoint LSNs at ``offsets`` of a redo file whose format (its first 4 bytes) is one of
    ``formats``; None: absent or another format."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
            if len(head) < 16 or int.from_bytes(head[:4], "big") not in formats:
                return None
            lsns = []
            for off in offsets:
                f.seek(off)
                lsns.append(int.from_bytes(f.read(8), "big"))
            return max(lsns)
    except FileNotFoundError:
        return None


def redo_checkpoint(path: Path) -> int | None:
    """The newest checkpoint LSN of a redo log: MariaDB 10.8+'s ``ib_logfile0``, or MySQL 8.0.30+'s
    ``#innodb_redo`` directory (the newest over its ``#ib_redoN`` files; the ``_tmp`` spares hold stale headers).
    None: absent or another format."""
    path = Path(path)
    if path.name != MYSQL_REDO_DIR:
        return _checkpoint_in(path, REDO_FORMATS, REDO_CHECKPOINTS)
    try:
        files = [path / n for n in os.listdir(path) if MYSQL_REDO_FILE.fullmatch(n)]
    except FileNotFoundError:
        return None
    lsns = [lsn for f in files if (lsn := _checkpoint_in(f, MYSQL_REDO_FORMATS, MYSQL_REDO_CHECKPOINTS)) is not None]
    return max(lsns) if lsns else None


def _redo_logs(plan: Plan) -> list[Path]:
    """The redo log the server would use if started on the source: in the source, else in the datadir."""
    for d in (plan.source_dir, plan.server["datadir"]):
        for name in ("ib_logfile0", MYSQL_REDO_DIR):
            p = Path(d) / name
            if p.exists():
                return [p]
    return []


def _stat_of(path: Path) -> dict:
    """Size and mtime of a redo log in a format not read here (of the newest file in a directory)."""
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        sts = [os.stat(path / n) for n in os.listdir(path)] or [st]
        return {"size": sum(s.st_size for s in sts), "mtime_ns": max(s.st_mtime_ns for s in sts)}
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def take(plan: Plan) -> dict:
    names = components.top_names(plan.component, model_stub(plan), plan.source_dir)
    files = {rel: st.st_size for rel, st in walk(plan.source_dir, names) if stat.S_ISREG(st.st_mode)}
    redo = {}
    for p in _redo_logs(plan):
        lsn = redo_checkpoint(p)
        redo[str(p)] = {"checkpoint_lsn": lsn} if lsn is not None else _stat_of(p)
    return {"files": files, "redo": redo}


def record(journal: Journal, plan: Plan) -> None:
    journal.save_json(FINGERPRINT_FILE, take(plan))


def _difference(then: dict, now: dict) -> str | None:
    for path, was in then["redo"].items():
        is_ = now["redo"].get(path)
        if is_ != was:
            what = (f"its redo log's checkpoint LSN moved from {was.get('checkpoint_lsn')} to "
                    f"{(is_ or {}).get('checkpoint_lsn')}" if "checkpoint_lsn" in was else "its redo log was written")
            return f"{what} ({path})"
    gone = sorted(set(then["files"]) - set(now["files"]))
    new = sorted(set(now["files"]) - set(then["files"]))
    resized = sorted(r for r in set(then["files"]) & set(now["files"]) if then["files"][r] != now["files"][r])
    for label, rels in (("files appeared", new), ("files vanished", gone), ("files changed size", resized)):
        if rels:
            return f"{label}: {', '.join(rels[:3])}"
    return None


def require_unchanged(journal: Journal, plan: Plan) -> None:
    """Refuse in one line when the source moved on since VERIFY (the server ran on it meanwhile)."""
    then = journal.load_json(FINGERPRINT_FILE)
    if then is None:
        return  # VERIFY not done by a mover that records it: nothing to compare with
    what = _difference(then, take(plan))
    if what:
        raise MoveHalted(f"the source {plan.source_dir} changed after the copy was verified ({what}): a server ran on "
                        f"it and took writes the target does not have; starting on the target would lose them, so "
                        f"run `innotier move rollback --id {plan.move_id}` and move again")
